"""The README is real: its quickstart and every `$` line run as written (the model loops
against local fake APIs), every example has its line, and they print what it shows."""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integrations._support import INTEGRATIONS
from tests.readme_runs import BLOCKS, README_GROUP, ReadmeRuns

ROOT = Path(__file__).resolve().parent.parent


def _quickstart() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the Quickstart section has no python block"
    return match.group(1)


def test_quickstart_runs_and_prints_what_the_readme_says(tmp_path: Path) -> None:
    """The quickstart exits 0; c1 is persisted and previewed, c2 answers, c3 is an error."""
    script = tmp_path / "quickstart.py"
    script.write_text(_quickstart())
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("c")]
    c1, c2, c3 = (line.split(" ") for line in lines)
    assert c1[:2] == ["c1", "success"]
    assert 3_000 < int(c1[2]) <= 10_000
    assert c2[:2] == ["c2", "success"]
    assert c3[:2] == ["c3", "error"]


def test_readme_names_the_two_commands() -> None:
    """The first screen names both commands."""
    head = (ROOT / "README.md").read_text()[:2500]
    assert "make demo" in head
    assert "make test" in head


def test_the_readme_shows_commands() -> None:
    """The README has console blocks of commands to run."""
    assert BLOCKS, "the README shows no commands to run"


# The examples that call a model API, the fake that answers them and the path it is sent to.
MODEL_LOOPS = {
    "openai_loop.py": ("openai", "/v1/chat/completions"),
    "openai_responses_loop.py": ("openai", "/v1/responses"),
    "anthropic_loop.py": ("anthropic", "/v1/messages"),
}


@README_GROUP
@pytest.mark.parametrize("index", [pytest.param(n, id=f"block{n + 1}") for n in range(len(BLOCKS))])
def test_every_readme_command_runs_as_written_and_prints_what_it_shows(
    index: int, readme_runs: ReadmeRuns
) -> None:
    """A newcomer's shell: each `$` line runs from the checkout (venv activation included),
    the model loops against local fake APIs."""
    run = readme_runs.block(index)
    block = run.block
    assert run.returncode == 0, f"{block.runnable}\n{run.stdout}\n{run.stderr}"
    assert [c.command for c in run.commands] == block.runnable
    if all("toolbatch " in command for command in block.runnable):
        # A toolbatch example shows every line it prints, nothing left out.
        printed = [line for line in run.stdout.splitlines() if line.strip()]
        assert printed == block.shown, (
            f"the README shows {block.shown!r}; the command printed:\n{run.stdout}"
        )
    for line in block.shown:
        assert line in run.stdout, f"the README shows {line!r}; the commands printed:\n" + (
            run.stdout
        )
    for command in block.runnable:
        loop = re.search(r"(?:^|\s)(\w+_MODEL)=(\S+) python examples/(\w+\.py)", command)
        if loop is None or loop.group(3) not in MODEL_LOOPS:
            continue
        api, path = MODEL_LOOPS[loop.group(3)]
        sent = [r for r in run.requests[api] if r.path == path]
        # Two requests: the calls, then the tool results; both for the model the line names.
        assert [r.body["model"] for r in sent] == [loop.group(2)] * 2, command
        assert "answer: 2 results" in run.command(command).stdout


def test_every_example_has_its_command_in_the_readme() -> None:
    """Each script under examples/ is run by a `$` line of the README."""
    commands = [command for block in BLOCKS for command in block.commands]
    for example in sorted((ROOT / "examples").glob("*.py")):
        pattern = rf"(?:^|\s)python examples/{re.escape(example.name)}(?:\s|$)"
        assert any(re.search(pattern, command) for command in commands), (
            f"examples/{example.name} has no command in the README: add a "
            f"`$ python examples/{example.name} ...` line to a console block"
        )


# -- every type the README names, with its import ---------------------------------------------

# Backticked words that are not Python names: Claude Code's hook events and tool names, a
# docstring section, units.
NOT_PYTHON_NAMES = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "PostToolBatch",
        "Bash",
        "Read",
        "Edit",
        "WebFetch",
        "Args",
        "MiB",
        "GiB",
    }
)
# Dotted backticked names that are span and attribute names (toolbatch/telemetry/README.md).
TELEMETRY_NAMES = frozenset({"toolbatch.turn", "toolbatch.call.status"})


def _inline_spans() -> list[str]:
    """The README's inline code spans, outside fenced blocks (a span may wrap a line)."""
    prose = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(), flags=re.S)
    return re.findall(r"`([^`]+)`", prose)


def _python_blocks() -> list[ast.Module]:
    readme = (ROOT / "README.md").read_text()
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT  # the snippets may await
    return [
        compile(block, "README.md", "exec", flags=flags)
        for block in re.findall(r"```python\n(.*?)```", readme, re.S)
    ]


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _stated_paths() -> set[str]:
    """Every import path the README states: `toolbatch.x.Y` in a code span, and in its python
    blocks each `from toolbatch.x import Y` and each `toolbatch.Y` used."""
    paths = {
        match.group(0)
        for span in _inline_spans()
        for match in re.finditer(r"\btoolbatch(?:\.[A-Za-z_]\w*)+", span)
    }
    for module in _python_blocks():
        for node in ast.walk(module):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("toolbatch"):
                paths |= {f"{node.module}.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.Attribute):
                dotted = _dotted(node)
                if dotted and dotted.startswith("toolbatch."):
                    paths.add(dotted)
    return paths - TELEMETRY_NAMES


def _named_types() -> dict[str, set[str]]:
    """Each capitalised name in a code span, with the attributes used on it (`Turn.parts`).

    A span that reads as a message (`Permission denied`, `Tool output truncated.`) names
    nothing; builtins (`None`, `RecursionError`) need no import.
    """
    named: dict[str, set[str]] = {}
    for span in _inline_spans():
        if re.match(r"[A-Z][a-z]+\s+[a-z]", span):
            continue
        for match in re.finditer(r"(?<![\w.])([A-Z]\w*[a-z]\w*)(?:\.([a-z_]\w*))?", span):
            name, attribute = match.groups()
            if name in NOT_PYTHON_NAMES or hasattr(builtins, name):
                continue
            named.setdefault(name, set()).update([attribute] if attribute else [])
    return named


def _unresolved(checks: list[tuple[str, list[str]]]) -> list[str]:
    """What does not resolve of each ``(path, attributes)``: the longest importable prefix
    of ``path``, then its names (in that module's ``__all__``) and the attributes used."""
    problems = []
    for path, attributes in checks:
        parts = path.split(".")
        value: Any = None
        for cut in range(len(parts), 0, -1):
            try:
                value = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            break
        module, rest = value, parts[cut:]
        if rest and rest[0] not in getattr(module, "__all__", [rest[0]]):
            problems.append(f"{path}: {rest[0]!r} is not in {module.__name__}.__all__")
            continue
        try:
            for name in rest:
                value = getattr(value, name)
        except AttributeError:
            problems.append(f"{path}: no such name")
            continue
        classes = getattr(value, "__mro__", ())
        fields = {key for cls in classes for key in vars(cls).get("__annotations__", {})}
        for attribute in attributes:
            if not hasattr(value, attribute) and attribute not in fields:
                problems.append(f"{path}.{attribute}: no such attribute")
    return problems


# In this process, in the worker that imports the frameworks anyway (a fresh interpreter
# importing every package the README names cost 4 s of CPU).
@INTEGRATIONS
def test_every_type_the_readme_names_is_stated_with_an_import_that_works() -> None:
    """Each backticked type has its import path in the README (`toolbatch.x.Y`, or an import
    in a python block), and every stated path imports a public name, its attributes too."""
    stated = _stated_paths()
    # The module map names the private bottom layer (`toolbatch._core`); nothing imports it.
    private = sorted(path for path in stated - {"toolbatch._core"} if "._" in path)
    assert not private, f"the README states private paths {private}: name the public package"
    where = {path.rsplit(".", 1)[1]: path for path in sorted(stated)}
    named = _named_types()
    unstated = sorted(name for name in named if name not in where)
    assert not unstated, (
        f"the README names {unstated} without saying where to import them from: write each "
        "once as `toolbatch.<package>.<Name>` or import it in the README's python block of "
        "imports"
    )
    checks = [(path, sorted(named.get(path.rsplit(".", 1)[1], ()))) for path in sorted(stated)]
    problems = _unresolved(checks)
    assert not problems, f"the README states imports that do not work: {problems}"
