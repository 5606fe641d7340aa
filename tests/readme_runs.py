"""The README's console blocks, each run once per test session as a newcomer's shell runs it.

`tests/test_readme.py` checks that each block runs as written and prints what it shows;
`tests/test_examples.py` checks what each example that a block runs does, in the output of
that same run: an example is run once, not once per file that checks it (a framework example
costs about 2 s of CPU). Both files are in the ``readme`` xdist group, so they share one
worker and its :class:`ReadmeRuns`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fake_model_apis import (
    Call,
    FakeApi,
    Recorded,
    anthropic_answer,
    chat_answer,
    fake_api,
    responses_answer,
)

__all__ = ["BLOCKS", "README_GROUP", "BlockRun", "ConsoleBlock", "ReadmeRuns"]

ROOT = Path(__file__).resolve().parent.parent
README_GROUP = pytest.mark.xdist_group("readme")
"""The group of every test that reads a :class:`ReadmeRuns` (one worker runs them all)."""


@dataclass(frozen=True)
class ConsoleBlock:
    """One console block that shows commands, as a reader's shell runs it."""

    setup: list[str]  # `source` / `export` lines of earlier blocks: the shell is still set up
    commands: list[str]
    shown: list[str]

    @property
    def runnable(self) -> list[str]:
        """The commands a test runs: all but `make` (the test is run by one)."""
        return [command for command in self.commands if not command.startswith("make ")]


def _console_blocks() -> list[ConsoleBlock]:
    """Each console block of the README that shows commands, in order."""
    readme = (ROOT / "README.md").read_text()
    blocks: list[ConsoleBlock] = []
    setup: list[str] = []
    for block in re.findall(r"```console\n(.*?)```", readme, re.S):
        lines = block.splitlines()
        commands = [line[2:] for line in lines if line.startswith("$ ")]
        if commands:
            shown = [line for line in lines if line.strip() and not line.startswith("$ ")]
            blocks.append(ConsoleBlock(list(setup), commands, shown))
            setup += [c for c in commands if c.startswith(("source ", "export "))]
    return blocks


BLOCKS = _console_blocks()

# What the fake model APIs answer the README's model loops: two calls, then text.
LOOP_CALLS: list[Call] = [
    ("call_a", "run_shell_command", json.dumps({"command": "seq 1 50000"})),
    ("call_b", "word_count", json.dumps({"text": "one two three"})),
]


def _openai_answer(calls: list[Call]) -> Any:
    """One OpenAI base URL answering both Chat Completions and Responses, as the real one."""
    chat, responses = chat_answer(calls, final="answer"), responses_answer(calls, final="answer")
    return lambda body: (responses if "input" in body else chat)(body)


@contextmanager
def _fake_model_apis() -> Iterator[dict[str, FakeApi]]:
    with (
        fake_api(_openai_answer(LOOP_CALLS), prefix="/v1") as openai,
        fake_api(anthropic_answer(LOOP_CALLS, final="answer")) as anthropic,
    ):
        yield {"openai": openai, "anthropic": anthropic}


def _reader_environment(directory: Path, apis: dict[str, FakeApi]) -> dict[str, str]:
    """A fresh shell (no venv on PATH) whose API variables point at the local fakes."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key != "VIRTUAL_ENV" and not key.startswith(("OPENAI_", "ANTHROPIC_"))
    }
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    env["TOOLBATCH_STATE_DIR"] = str(directory / "state")
    env["TMPDIR"] = str(directory)
    env["OPENAI_API_KEY"] = "sk-readme"
    env["OPENAI_BASE_URL"] = apis["openai"].url
    env["ANTHROPIC_API_KEY"] = "sk-ant-readme"
    env["ANTHROPIC_BASE_URL"] = apis["anthropic"].url
    return env


@dataclass(frozen=True)
class CommandRun:
    """What one `$` line printed, in its block's run."""

    command: str
    stdout: str
    stderr: str


@dataclass(frozen=True)
class BlockRun:
    """One run of a block: its exit status, all it printed, each command's own part of that,
    and the requests the fake model APIs received."""

    block: ConsoleBlock
    returncode: int
    stdout: str
    stderr: str
    commands: list[CommandRun]
    requests: dict[str, list[Recorded]]

    def command(self, text: str) -> CommandRun:
        """The run of the block's command ``text``."""
        (found,) = [run for run in self.commands if run.command == text]
        return found


def _split(output: str, marker: str) -> tuple[str, list[str]]:
    """``output`` without the marker lines, and each command's part of it (in order)."""
    pieces = re.split(rf"\n?{re.escape(marker)} \d+\n", output)
    return "".join(pieces), pieces[1:]


def run_block(block: ConsoleBlock, directory: Path) -> BlockRun:
    """Run ``block`` in a fresh shell from the checkout, the model loops against local fakes.

    A marker line before each command (on stdout and stderr) splits what each printed; the
    markers are not part of what the block printed.
    """
    marker = f"@@readme-command-{uuid.uuid4().hex}"
    lines = ["set -euo pipefail", *block.setup]
    for number, command in enumerate(block.runnable):
        lines.append(
            f"printf '\\n%s\\n' '{marker} {number}'; printf '\\n%s\\n' '{marker} {number}' >&2"
        )
        lines.append(command)
    with _fake_model_apis() as apis:
        done = subprocess.run(
            ["bash", "-c", "\n".join(lines) + "\n"],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=ROOT,
            env=_reader_environment(directory, apis),
            check=False,
        )
    stdout, outs = _split(done.stdout, marker)
    stderr, errs = _split(done.stderr, marker)
    commands = [
        CommandRun(command, out, err)
        for command, out, err in zip(block.runnable, outs, errs, strict=False)
    ]
    requests = {name: list(api.requests) for name, api in apis.items()}
    return BlockRun(block, done.returncode, stdout, stderr, commands, requests)


class ReadmeRuns:
    """Each README block's run, made the first time a test asks for it."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._runs: dict[int, BlockRun] = {}

    def block(self, index: int) -> BlockRun:
        """The run of ``BLOCKS[index]``."""
        if index not in self._runs:
            directory = self._factory.mktemp(f"readme-block{index + 1}")
            self._runs[index] = run_block(BLOCKS[index], directory)
        return self._runs[index]

    def block_of(self, text: str) -> BlockRun:
        """The run of the block holding the README's `$ {text}` line, which must succeed."""
        (index,) = [n for n, block in enumerate(BLOCKS) if text in block.runnable]
        run = self.block(index)
        assert run.returncode == 0, f"{run.block.runnable}\n{run.stdout}\n{run.stderr}"
        return run

    def command(self, text: str) -> CommandRun:
        """The run of the README's `$ {text}` line, which must succeed with its block."""
        return self.block_of(text).command(text)
