"""Command hooks: an external executable that speaks Claude Code's hook JSON.

The executable gets the event's input as JSON on stdin and answers with its exit code and
stdout, exactly as Claude Code reads them (code.claude.com/docs/en/hooks, "Exit code
output"; shared/reference/ecosystem-2.md 1.5-1.6):

* **exit 0**: stdout is read as JSON only when its first non-blank character is ``{``;
  anything else (plain text, a JSON array) goes to the debug log and decides nothing. A
  JSON object that is not a valid answer (``permissionDecision: "maybe"``) is a hook error.
* **exit 2**: a blocking error. The reason is the JSON's own reason when it gives one, else
  stderr. What it blocks depends on the event (a PreToolUse call is denied; PostToolUse
  cannot block, its stderr is told to the model; PostToolBatch stops the agent).
* **any other exit**: a non-blocking error, unless stdout holds a valid JSON answer, which
  then decides alone. A missing script (127) is such an error: the gate does nothing.

What a hook prints is bounded: stdout over ``max_output_bytes`` (default 1 MiB) or JSON
nested deeper than ``MAX_HOOK_JSON_DEPTH`` (32) is that hook's failure, logged, and changes
nothing; the others answer as usual.

The files the command runs (its script: ``bash .claude/hooks/guard.sh``) are fingerprinted
when the hook is made (when settings are loaded) and checked before every run: a changed one
is refused with :class:`HookScriptChanged`, which denies a PreToolUse call (and is told to
the model after a PostToolUse), naming the file (``toolbatch.sandbox._pinning``).

The process runs in its own session (process group) with only the documented default
environment plus the hook's own ``env`` (hooks read from settings files get
``CLAUDE_PROJECT_DIR``, as Claude Code sets it); on timeout or cancellation the whole group
is killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import structlog
from anyio.abc import ByteReceiveStream, Process

from toolbatch.errors import ConfigError, HookFailed, HookScriptChanged
from toolbatch.hooks._models import PostToolBatchInput, PostToolBatchOutput
from toolbatch.sandbox import ScriptPins, minimal_environment, stop_group
from toolbatch.telemetry import child_environment

__all__ = [
    "BLOCK_EXIT_CODE",
    "DEFAULT_HOOK_TIMEOUT_S",
    "DEFAULT_MAX_HOOK_OUTPUT_BYTES",
    "MAX_HOOK_JSON_DEPTH",
    "CommandHook",
    "CommandOutcome",
    "HookFailed",
    "HookScriptChanged",
    "hook_payload",
    "read_answer",
]

log = structlog.get_logger("toolbatch.hooks")

DEFAULT_HOOK_TIMEOUT_S: Final = 15.0
"""The timeout of a ``CommandHook`` built in Python (settings hooks use Claude Code's 600 s)."""
BLOCK_EXIT_CODE: Final = 2
DEFAULT_MAX_HOOK_OUTPUT_BYTES: Final = 1 * 2**20
"""A hook that prints more than this on stdout has failed (its answer is ignored)."""
MAX_HOOK_JSON_DEPTH: Final = 32
"""A hook answer nested deeper than this has failed (no real answer is deeper than 4)."""
MAX_HOOK_STDERR_BYTES: Final = 64 * 2**10
"""Stderr beyond this is dropped (it is only a reason or a log line)."""
KILL_GRACE_S: Final = 1.0
DRAIN_S: Final = 1.0
CLEANUP_S: Final = 5.0


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    """What a command hook did, read as Claude Code reads it.

    Attributes:
        code: its exit code.
        answer: its JSON answer, when stdout held a JSON object (``None`` otherwise).
        stderr: its stderr, stripped (a block reason on exit 2).
        plain: stdout that was not JSON (debug log only).
    """

    code: int
    answer: dict[str, Any] | None
    stderr: str
    plain: str = ""

    @property
    def blocks(self) -> bool:
        """Exit code 2."""
        return self.code == BLOCK_EXIT_CODE


async def _read_capped(
    stream: ByteReceiveStream | None, sink: bytearray, limit: int, over: list[bool]
) -> None:
    if stream is None:
        return
    with contextlib.suppress(
        anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
    ):
        async for chunk in stream:
            room = limit - len(sink)
            if len(chunk) > room:
                over.append(True)
            if room > 0:
                sink.extend(chunk[:room])


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON, without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_HOOK_JSON_DEPTH:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def read_answer(stdout: str, label: str) -> tuple[dict[str, Any] | None, str]:
    """Claude Code's stdout rule: a JSON object if it starts with ``{``, else plain text.

    Returns:
        The object (or ``None``) and the plain text (``""`` when it was JSON).

    Raises:
        HookFailed: the JSON is nested deeper than ``MAX_HOOK_JSON_DEPTH``.
    """
    text = stdout.strip()
    if not text.startswith("{"):
        return None, text
    try:
        answer = json.loads(text)
    except RecursionError:
        raise HookFailed(
            f"hook {label!r} printed JSON nested deeper than {MAX_HOOK_JSON_DEPTH} levels"
        ) from None
    except json.JSONDecodeError:
        return None, text  # Claude Code treats invalid JSON as plain text
    if not isinstance(answer, dict):
        return None, text
    if _depth(answer) > MAX_HOOK_JSON_DEPTH:
        raise HookFailed(
            f"hook {label!r} printed JSON nested deeper than {MAX_HOOK_JSON_DEPTH} levels"
        )
    return answer, ""


@dataclass(frozen=True, slots=True)
class CommandHook:
    """A hook run as an external command.

    Args:
        argv: the command and its arguments (no shell; pass ``["bash", "-c", "..."]`` for
            one, or use :meth:`shell`).
        timeout: seconds before the hook is killed and ignored.
        env: variables added to the documented default environment.
        cwd: the working directory (default: the agent's).
        max_output_bytes: stdout beyond this makes the hook fail (its answer is ignored).
    """

    argv: Sequence[str]
    timeout: float = DEFAULT_HOOK_TIMEOUT_S
    env: Mapping[str, str] | None = field(default=None)
    cwd: str | os.PathLike[str] | None = None
    max_output_bytes: int = DEFAULT_MAX_HOOK_OUTPUT_BYTES
    pins: ScriptPins = field(default_factory=ScriptPins, init=False, repr=False, compare=False)
    """The fingerprints of the files it runs, taken when it was made."""

    def __post_init__(self) -> None:
        if isinstance(self.argv, str) or not self.argv:
            raise ConfigError(
                f"CommandHook argv must be a non-empty list of strings, got {self.argv!r}; "
                f'use ["bash", "-c", "<script>"] (or CommandHook.shell("<script>")) to run a '
                f"shell snippet"
            )
        if not all(isinstance(arg, str) for arg in self.argv):
            raise ConfigError(f"CommandHook argv items must be strings, got {self.argv!r}")
        if (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, int | float)
            or not 0 < self.timeout < float("inf")
        ):
            raise ConfigError(
                f"CommandHook timeout must be a positive number of seconds, got {self.timeout!r}"
            )
        if (
            isinstance(self.max_output_bytes, bool)
            or not isinstance(self.max_output_bytes, int)
            or self.max_output_bytes < 1
        ):
            raise ConfigError(
                f"CommandHook max_output_bytes must be a positive int, got "
                f"{self.max_output_bytes!r}"
            )
        object.__setattr__(
            self, "pins", ScriptPins.of(self.argv, cwd=self.cwd, env=minimal_environment(self.env))
        )

    @classmethod
    def shell(
        cls,
        command: str,
        *,
        shell: str = "sh",
        timeout: float = DEFAULT_HOOK_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> CommandHook:
        """A hook written as a shell command line, run as ``sh -c command`` (Claude Code's
        ``command`` without ``args``; ``shell="bash"`` for its ``shell: "bash"``)."""
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"a hook command must be a non-empty string, got {command!r}")
        return cls([shell, "-c", command], timeout=timeout, env=env, cwd=cwd)

    @property
    def label(self) -> str:
        """A short name for logs."""
        if len(self.argv) == 3 and self.argv[1] == "-c":
            return self.argv[2][:80]
        return os.path.basename(self.argv[0])

    async def __call__(self, batch: PostToolBatchInput) -> PostToolBatchOutput | None:
        """Run the command as a PostToolBatch hook and translate its answer.

        Raises:
            HookFailed: the command could not start, timed out, exited non-zero (but not
                2) without a valid JSON answer, or answered with an invalid one.
        """
        outcome = await self.run(hook_payload(batch))
        return post_tool_batch_answer(outcome, self.label)

    async def run(self, payload: bytes) -> CommandOutcome:
        """Run the command with ``payload`` on stdin.

        Raises:
            HookFailed: it could not start, timed out, printed too much, or failed (a code
                other than 0 and 2) without a JSON answer on stdout.
            HookScriptChanged: a file it runs changed since it was made; it did not run.
        """
        reason = self.pins.changed()
        if reason is not None:
            log.warning("hooks.script_changed", hook=self.label, reason=reason)
            raise HookScriptChanged(self.label, reason)
        try:
            process = await anyio.open_process(
                list(self.argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=child_environment(minimal_environment(self.env)),
                start_new_session=True,
            )
        except OSError as exc:
            raise HookFailed(f"hook {self.argv[0]!r} could not start: {exc}") from exc
        stdout = bytearray()
        stderr = bytearray()
        over: list[bool] = []
        try:
            with anyio.fail_after(self.timeout):
                await self._exchange(process, payload, stdout, stderr, over)
        except TimeoutError as exc:
            raise HookFailed(
                f"hook {self.label!r} did not answer within {self.timeout:g} s and was killed"
            ) from exc
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_S):
                await self._reap(process)
        if over:
            raise HookFailed(
                f"hook {self.label!r} printed more than {self.max_output_bytes:,} bytes on "
                f"stdout; its answer is ignored (CommandHook(max_output_bytes=...))"
            )
        code = process.returncode if process.returncode is not None else -1
        err_text = stderr.decode("utf-8", "replace").strip()
        answer, plain = read_answer(stdout.decode("utf-8", "replace"), self.label)
        if plain:
            log.debug("hooks.plain_output", hook=self.label, code=code, stdout=plain[:2000])
        if code not in (0, BLOCK_EXIT_CODE) and answer is None:
            raise HookFailed(
                f"hook {self.label!r} exited with code {code}"
                + (f": {err_text[:500]}" if err_text else "")
            )
        if code not in (0, BLOCK_EXIT_CODE):
            log.warning("hooks.error_exit_with_answer", hook=self.label, code=code)
        return CommandOutcome(code, answer, err_text, plain)

    async def _exchange(
        self,
        process: Process,
        payload: bytes,
        stdout: bytearray,
        stderr: bytearray,
        over: list[bool],
    ) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read_capped, process.stdout, stdout, self.max_output_bytes, over)
            tg.start_soon(_read_capped, process.stderr, stderr, MAX_HOOK_STDERR_BYTES, [])
            if process.stdin is not None:
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await process.stdin.send(payload)
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await process.stdin.aclose()
            await process.wait()
            # A background child may hold the pipes open: drain briefly, then move on.
            tg.cancel_scope.deadline = anyio.current_time() + DRAIN_S

    @staticmethod
    async def _reap(process: Process) -> None:
        await stop_group(process, grace_s=KILL_GRACE_S)
        await process.aclose()


def hook_payload(data: PostToolBatchInput | Mapping[str, Any]) -> bytes:
    """The JSON a command hook reads on stdin, as UTF-8.

    Text stays as it is (no ``\\uXXXX`` for every non-ASCII character), so the payload is
    about the size of the bounded batch; a lone surrogate (a model may send one, a tool may
    print one) becomes its JSON escape instead of an encoding error that would silently
    skip the hook.
    """
    dumped = data.model_dump(mode="json") if isinstance(data, PostToolBatchInput) else data
    text = json.dumps(dumped, ensure_ascii=False)
    return text.encode("utf-8", "backslashreplace")


def post_tool_batch_answer(outcome: CommandOutcome, label: str) -> PostToolBatchOutput | None:
    """A PostToolBatch hook's outcome: exit 2, ``decision: "block"`` and ``continue: false``
    stop the agent; ``additionalContext`` adds context."""
    stop = outcome.blocks
    reasons: list[str] = []
    answer = outcome.answer or {}
    if answer.get("decision") not in (None, "block"):
        raise HookFailed(
            f"hook {label!r} (PostToolBatch): 'decision' must be 'block', got "
            f"{answer['decision']!r:.80}"
        )
    if answer.get("decision") == "block":
        stop = True
        if isinstance(answer.get("reason"), str):
            reasons.append(str(answer["reason"]))
    if answer.get("continue") is False:
        stop = True
        if isinstance(answer.get("stopReason"), str):
            reasons.append(str(answer["stopReason"]))
    if outcome.blocks and not reasons and outcome.stderr:
        reasons.append(outcome.stderr)
    context: str | None = None
    specific = answer.get("hookSpecificOutput")
    if isinstance(specific, dict) and isinstance(specific.get("additionalContext"), str):
        context = specific["additionalContext"]
    elif isinstance(answer.get("additionalContext"), str):
        context = str(answer["additionalContext"])
    if not stop and context is None:
        return None
    reason = "; ".join(reasons) or (f"stopped by hook {label!r}" if stop else None)
    if outcome.blocks and not reasons:
        reason = f"blocked by hook {label!r} (exit code 2)"
    return PostToolBatchOutput(additional_context=context, stop=stop, stop_reason=reason)
