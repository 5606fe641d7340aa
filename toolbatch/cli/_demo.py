"""``toolbatch demo``: a scripted agent loop over real tools, and an account of each turn.

A ``ScriptedModel`` (no network) drives an ``AgentLoop`` through three model turns in a
fresh working directory. The calls are real: shell commands (a build whose output is too
long, a failing test run, a grep), the demo MCP server (``python -m
toolbatch.cli._demo_mcp_server``: a ticket and a large log search) and a custom
``@toolbatch.tool`` (``file_stats``). The budget is small, so the finalizer has to shorten
the turns. For every call the account shows what it produced (the size of its complete
output when the producer saved it, else its display text), what the model received (parts
and sizes, before and after finalization), and what was persisted where and by whom; for
every turn the budget used. It then checks that the transcript holds
exactly what the model received and that every turn kept to the budget (exit code 1 if not).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

import structlog
from pydantic import JsonValue

from toolbatch._core import (
    FileDataPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    ToolCall,
    ToolCallResponse,
    Turn,
    parts_adapter,
)
from toolbatch.agent import AgentLoop, ScriptedModel
from toolbatch.producers import FunctionTool, tool
from toolbatch.recorder import JsonlRecorder, load_session
from toolbatch.scheduler import SchedulerConfig, ToolScheduler, default_registry
from toolbatch.transports import display_text

__all__ = ["DEMO_BUDGET_CHARS", "run_demo"]

log = structlog.get_logger("toolbatch.demo")

DEMO_BUDGET_CHARS: Final = 4_000
"""Small enough that both tool turns of the script must be shortened by the finalizer."""
EXCERPT_CHARS: Final = 72
BUILD_STEPS: Final = 3_000

_BUILD = (
    f"awk 'BEGIN {{ for (i = 1; i <= {BUILD_STEPS}; i++) "
    f'printf "[%d/{BUILD_STEPS}] cc -O2 -c src/module_%04d.c ... ok\\n", i, i }}\' '
    "| tee build.log"
)
_FAILING_TESTS = (
    "printf 'collected 3 items\\n\\ntests/test_upload.py::test_upload_resumes FAILED\\n"
    "E   TimeoutError: read timed out after 2.0 s\\n\\n1 failed, 2 passed\\n'; exit 1"
)

SCRIPT: Final[Sequence[Sequence[Mapping[str, Any]]]] = (
    (
        {"id": "t1-build", "name": "run_shell_command", "args": {"command": _BUILD}},
        {"id": "t1-tests", "name": "run_shell_command", "args": {"command": _FAILING_TESTS}},
        {"id": "t1-ticket", "name": "mcp__demo__ticket", "args": {"number": 101}},
    ),
    (
        {
            "id": "t2-grep",
            "name": "run_shell_command",
            "args": {"command": "grep -n 'module_04' build.log"},
        },
        {
            "id": "t2-logs",
            "name": "mcp__demo__search_logs",
            "args": {"pattern": "test_case_3", "max_lines": 150},
        },
        {"id": "t2-stats", "name": "file_stats", "args": {"path": "build.log"}},
    ),
)
FINAL_ANSWER: Final = (
    "The build is fine (3,000 modules compiled); CI fails on test_upload_resumes, a read "
    "timeout already tracked as ticket #101. Raising the 2 s read timeout should fix it."
)
PROMPT: Final = "Why is CI red? Build the project, run the tests and check the tracker."


def _make_file_stats(workdir: Path) -> FunctionTool:
    @tool(read_only=True)
    def file_stats(path: str) -> dict[str, JsonValue]:
        """Count the lines, words and bytes of a text file of the project; give its last line.

        Args:
            path: the file, relative to the project directory.
        """
        data = (workdir / path).read_text(encoding="utf-8", errors="replace")
        lines = data.splitlines()
        return {
            "path": path,
            "lines": len(lines),
            "words": len(data.split()),
            "bytes": len(data.encode()),
            "last_line": lines[-1] if lines else "",
        }

    return file_stats


class _Account:
    """Observes calls: each one's response before finalization and how long it ran."""

    def __init__(self) -> None:
        self.before: dict[str, ToolCallResponse] = {}
        self.seconds: dict[str, float] = {}
        self._started: dict[str, float] = {}

    def call_started(self, call: ToolCall) -> None:
        self._started[call.id] = time.perf_counter()

    def call_progress(self, call: ToolCall, message: str) -> None:
        del call, message

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        self.before[call.id] = response
        started = self._started.get(call.id)
        if started is not None:
            self.seconds[call.id] = time.perf_counter() - started


def _excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = text.replace("\n", " | ").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _ends(lines: Sequence[str]) -> str:
    """An excerpt of the first and the last non-blank line."""
    shown = [line for line in lines if line.strip()]
    if not shown:
        return "(blank)"
    head, tail = _excerpt(shown[0], 40), _excerpt(shown[-1], 40)
    return f"{head!r}" if len(shown) == 1 else f"{head!r} ... {tail!r}"


def _line_count(data: bytes | str) -> int:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _describe_output(response: ToolCallResponse) -> str:
    """What a call produced: its complete output when the producer saved it, else its display.

    The producer's files (``persisted_output_files``) hold everything the tool wrote, so
    their sizes are the real totals; the display of a long output is only a window of it.
    """
    files = response.persisted_output_files or ()
    if files:
        data = b"".join(_read(path) for path in files)
        lines = data.decode("utf-8", "replace").split("\n")
        return (
            f"{len(data):,} bytes, {_line_count(data):,} lines, all saved by the producer: "
            f"{_ends(lines)}"
        )
    display = response.display
    if (
        display is None
        or isinstance(display, str)
        or (isinstance(display, dict) and "text" in display)
    ):
        text = display_text(response)
        if not text:
            return "nothing to display"
        return f"{len(text):,} chars, {_line_count(text):,} lines: {_ends(text.split(chr(10)))}"
    rendered = json.dumps(display, ensure_ascii=False)
    return f"JSON, {len(rendered):,} chars: {_excerpt(rendered)}"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def _describe_part(part: Part) -> list[str]:
    if isinstance(part, FunctionResponsePart):
        described = []
        for key, value in part.function_response.response.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            described.append(f"{key} {len(text):,} chars: {_excerpt(text)!r}")
        return described
    if isinstance(part, TextPart):
        return [f"text {len(part.text):,} chars: {_excerpt(part.text)!r}"]
    if isinstance(part, InlineDataPart):
        return [f"{part.inline_data.mime_type} inline, {len(part.inline_data.data):,} base64 chars"]
    if isinstance(part, FileDataPart):
        return [f"{part.file_data.mime_type} file {part.file_data.file_uri}"]
    return [repr(part)]


def _describe_call(call: ToolCall) -> str:
    if call.name == "run_shell_command":
        return f"$ {_excerpt(str(call.args.get('command', '')), 64)}"
    return f"{call.name}({_excerpt(json.dumps(call.args, ensure_ascii=False), 64)})"


def _shown_path(path: Path, workdir: Path) -> str:
    try:
        return str(path.relative_to(workdir))
    except ValueError:
        return str(path)


def _file_size(path: Path) -> str:
    try:
        return f"{path.stat().st_size:,} bytes"
    except OSError:
        return "missing"


class _Printer:
    def __init__(self, out: TextIO, workdir: Path) -> None:
        self.out = out
        self.workdir = workdir

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def call(self, call: ToolCall, after: ToolCallResponse, account: _Account) -> None:
        before = account.before.get(call.id)
        seconds = account.seconds.get(call.id)
        took = f" ({seconds:.1f} s)" if seconds is not None else ""
        self.line(f"  [{call.id}] {_describe_call(call)}{took}")
        self.line(f"      produced   {_describe_output(before if before is not None else after)}")
        self.line(f"      model got  {after.status}, {after.content_length:,} chars of text")
        for part in after.parts:
            for described in _describe_part(part):
                self.line(f"                 - {described}")
        if before is not None:
            if before.content_length != after.content_length:
                self.line(
                    f"                 the producer gave {before.content_length:,} chars; the "
                    f"finalizer shortened it to fit the turn's budget"
                )
            else:
                self.line("                 unchanged by the finalizer")
        earlier = set(before.persisted_output_files or ()) if before is not None else set()
        paths = after.persisted_output_files or ()
        if not paths:
            self.line("      persisted  nothing: the model got the complete output")
        for path in paths:
            if path in earlier:
                who = "by the producer"
                if before is not None and before.content_length != after.content_length:
                    who += "; the finalizer reused it, no second copy"
            else:
                who = "by the finalizer, once"
            self.line(
                f"      persisted  {_shown_path(path, self.workdir)} ({_file_size(path)}, {who})"
            )


def _dump(parts: Sequence[Part]) -> Any:
    return parts_adapter.dump_python(list(parts), mode="json", by_alias=True, exclude_none=True)


async def run_demo(*, budget: int | None, workdir: str | None, out: TextIO) -> int:
    """Run the demo scenario and print its account to ``out``; the exit code is returned.

    Args:
        budget: the budget per turn in characters (``None``: ``DEMO_BUDGET_CHARS``; ``0``
            disables it).
        workdir: where commands run and files go (``None``: a new temp directory).
        out: where the account is written.
    """
    started = time.perf_counter()
    limit = DEMO_BUDGET_CHARS if budget is None else (budget if budget > 0 else None)
    root = (
        Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="toolbatch-demo-"))
    )
    root = root.absolute()
    root.mkdir(parents=True, exist_ok=True)
    artifacts = root / "artifacts"
    transcript = root / "transcript.jsonl"
    transcript.unlink(missing_ok=True)
    registry = default_registry(cwd=root)
    registry.register(_make_file_stats(root))
    config = SchedulerConfig(
        batch_budget=limit,
        artifacts_dir=artifacts,
        workspace_roots=[root],  # the commands write build.log there, wherever it is
        mcp_servers={
            "mcpServers": {
                "demo": {
                    "command": sys.executable,
                    "args": ["-m", "toolbatch.cli._demo_mcp_server"],
                }
            }
        },
    )
    printer = _Printer(out, root)
    account = _Account()
    script: list[str | Sequence[Mapping[str, Any]]] = [*SCRIPT, FINAL_ANSWER]
    async with ToolScheduler(registry, config) as scheduler:
        names = [declaration.name for declaration in await scheduler.wait_for_tools()]
        printer.line(
            f"toolbatch demo: a scripted agent (no network), {len(script)} model turns, "
            f"real tools, budget "
            f"{'disabled' if limit is None else f'{limit:,} characters per tool turn'}"
        )
        printer.line(f"  workdir    {root}")
        printer.line(f"  artifacts  {artifacts}")
        printer.line(f"  tools      {', '.join(names)}")
        failures = getattr(scheduler.mcp_servers, "failures", {})
        for server, error in failures.items():
            printer.line(f"  (MCP server {server!r} did not start: {error})")
        printer.line(f"  prompt     {PROMPT}")
        loop = AgentLoop(ScriptedModel(script), scheduler, recorder=JsonlRecorder(transcript))
        outcome = await loop.prompt(PROMPT, observer=account)
    healthy = True
    for number, (reply, turn) in enumerate(zip(outcome.replies, outcome.turns, strict=False), 1):
        printer.line()
        printer.line(f"Turn {number}: the model called {len(reply.tool_calls)} tools at once")
        for call, response in zip(reply.tool_calls, turn.responses, strict=True):
            printer.call(call, response, account)
        healthy &= _turn_footer(printer, turn, account, limit)
    printer.line()
    printer.line(f"Turn {len(outcome.replies)}: the model answered")
    printer.line(f"  {outcome.text}")
    printer.line()
    healthy &= _check_transcript(printer, transcript, outcome.turns, root)
    written = sorted(artifacts.glob("*")) if artifacts.is_dir() else []
    total = sum(path.stat().st_size for path in written)
    printer.line(f"Artifacts    {len(written)} files, {total:,} bytes, each written once:")
    for path in written:
        printer.line(f"               {_shown_path(path, root)}")
    printer.line(
        f"Done in {time.perf_counter() - started:.1f} s; everything is left in {root} to look at."
    )
    out.flush()
    return 0 if healthy else 1


def _turn_footer(printer: _Printer, turn: Turn, account: _Account, limit: int | None) -> bool:
    used = sum(response.content_length for response in turn.responses)
    before = sum(
        account.before[r.call_id].content_length if r.call_id in account.before else 0
        for r in turn.responses
    )
    of = "no budget" if limit is None else f"of the {limit:,} budget"
    printer.line(
        f"  budget     {used:,} chars sent to the model, {of} "
        f"({before:,} chars before finalization)"
    )
    if limit is not None and used > limit:
        printer.line(f"  PROBLEM    the turn is over budget by {used - limit:,} chars")
        return False
    return True


def _check_transcript(
    printer: _Printer, transcript: Path, turns: Sequence[Turn], root: Path
) -> bool:
    recorded = [entry for entry in load_session(transcript) if entry.type == "tool_turn"]
    same = len(recorded) == len(turns) and all(
        _dump(entry.parts) == _dump(turn.parts)
        for entry, turn in zip(recorded, turns, strict=False)
    )
    verdict = (
        "their parts are exactly what the model received"
        if same
        else "PROBLEM: the recorded parts differ from what the model received"
    )
    printer.line(
        f"Transcript   {_shown_path(transcript, root)}: {len(recorded)} tool turns; {verdict}"
    )
    return same
