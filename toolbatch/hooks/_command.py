"""Command hooks: an external executable that speaks Claude Code's hook JSON.

The executable gets the ``PostToolBatchInput`` as JSON on stdin. It answers on stdout with a
JSON object (or nothing): ``{"decision": "block", "reason": ...}`` stops the batch, and
``{"hookSpecificOutput": {"hookEventName": "PostToolBatch", "additionalContext": ...}}``
adds context; ``{"continue": false, "stopReason": ...}`` also stops. Exit code 2 blocks
with stderr as the reason; any other non-zero exit, a timeout or output that is not a JSON
object is a hook failure: it is logged and the batch goes on unchanged.

The process runs in its own session (process group) with only the documented default
environment plus the hook's own ``env``; on timeout or cancellation the whole group is
killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import anyio
from anyio.abc import ByteReceiveStream, Process

from toolbatch._environment import minimal_environment
from toolbatch._process import stop_group
from toolbatch.errors import ConfigError, ToolbatchError
from toolbatch.hooks._models import PostToolBatchInput, PostToolBatchOutput
from toolbatch.telemetry import child_environment

__all__ = [
    "BLOCK_EXIT_CODE",
    "DEFAULT_HOOK_TIMEOUT_S",
    "CommandHook",
    "HookFailed",
    "hook_payload",
]

DEFAULT_HOOK_TIMEOUT_S: Final = 15.0
BLOCK_EXIT_CODE: Final = 2
MAX_HOOK_OUTPUT_BYTES: Final = 4 * 2**20
"""A hook's stdout (and stderr) beyond this is discarded; its answer must be smaller."""
KILL_GRACE_S: Final = 1.0
DRAIN_S: Final = 1.0
CLEANUP_S: Final = 5.0


class HookFailed(ToolbatchError):
    """A hook crashed, timed out or answered something that is not a hook answer."""


async def _read_capped(stream: ByteReceiveStream | None, sink: bytearray) -> None:
    if stream is None:
        return
    with contextlib.suppress(
        anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
    ):
        async for chunk in stream:
            room = MAX_HOOK_OUTPUT_BYTES - len(sink)
            if room > 0:
                sink.extend(chunk[:room])


@dataclass(frozen=True, slots=True)
class CommandHook:
    """A PostToolBatch hook run as an external command.

    Args:
        argv: the command and its arguments (no shell; pass ``["bash", "-c", "..."]`` for
            one).
        timeout: seconds before the hook is killed and ignored.
        env: variables added to the documented default environment.
        cwd: the working directory (default: the agent's).
    """

    argv: Sequence[str]
    timeout: float = DEFAULT_HOOK_TIMEOUT_S
    env: Mapping[str, str] | None = field(default=None)
    cwd: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.argv, str) or not self.argv:
            raise ConfigError(
                f"CommandHook argv must be a non-empty list of strings, got {self.argv!r}; "
                f'use ["bash", "-c", "<script>"] to run a shell snippet'
            )
        if not all(isinstance(arg, str) for arg in self.argv):
            raise ConfigError(f"CommandHook argv items must be strings, got {self.argv!r}")
        if (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, int | float)
            or not self.timeout > 0
        ):
            raise ConfigError(
                f"CommandHook timeout must be a positive number of seconds, got {self.timeout!r}"
            )

    @property
    def label(self) -> str:
        """A short name for logs."""
        return os.path.basename(self.argv[0])

    async def __call__(self, batch: PostToolBatchInput) -> PostToolBatchOutput | None:
        """Run the command on ``batch`` and translate its answer.

        Raises:
            HookFailed: the command could not start, timed out, exited non-zero (but not
                2), or printed something other than a JSON object.
        """
        payload = hook_payload(batch)
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
        try:
            with anyio.fail_after(self.timeout):
                await self._exchange(process, payload, stdout, stderr)
        except TimeoutError as exc:
            raise HookFailed(
                f"hook {self.label!r} did not answer within {self.timeout:g} s and was killed"
            ) from exc
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_S):
                await self._reap(process)
        return self._interpret(process.returncode, bytes(stdout), bytes(stderr))

    async def _exchange(
        self, process: Process, payload: bytes, stdout: bytearray, stderr: bytearray
    ) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read_capped, process.stdout, stdout)
            tg.start_soon(_read_capped, process.stderr, stderr)
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

    def _interpret(
        self, code: int | None, stdout: bytes, stderr: bytes
    ) -> PostToolBatchOutput | None:
        err_text = stderr.decode("utf-8", "replace").strip()
        if code == BLOCK_EXIT_CODE:
            reason = err_text or f"blocked by hook {self.label!r} (exit code 2)"
            return PostToolBatchOutput(stop=True, stop_reason=reason)
        if code != 0:
            raise HookFailed(
                f"hook {self.label!r} exited with code {code}"
                + (f": {err_text[:500]}" if err_text else "")
            )
        text = stdout.decode("utf-8", "replace").strip()
        if not text:
            return None
        try:
            answer = json.loads(text)
        except json.JSONDecodeError as exc:
            raise HookFailed(
                f"hook {self.label!r} printed output that is not JSON ({exc}): {text[:200]!r}"
            ) from exc
        if not isinstance(answer, dict):
            raise HookFailed(
                f"hook {self.label!r} printed JSON that is not an object: {text[:200]!r}"
            )
        return _translate_answer(answer, self.label)


def hook_payload(batch: PostToolBatchInput) -> bytes:
    """The JSON a command hook reads on stdin, as UTF-8.

    Text stays as it is (no ``\\uXXXX`` for every non-ASCII character), so the payload is
    about the size of the bounded batch; a lone surrogate (a model may send one, a tool may
    print one) becomes its JSON escape instead of an encoding error that would silently
    skip the hook.
    """
    text = json.dumps(batch.model_dump(mode="json"), ensure_ascii=False)
    return text.encode("utf-8", "backslashreplace")


def _translate_answer(answer: dict[str, object], label: str) -> PostToolBatchOutput | None:
    stop = False
    reasons: list[str] = []
    if answer.get("decision") == "block":
        stop = True
        if isinstance(answer.get("reason"), str):
            reasons.append(str(answer["reason"]))
    if answer.get("continue") is False:
        stop = True
        if isinstance(answer.get("stopReason"), str):
            reasons.append(str(answer["stopReason"]))
    context: str | None = None
    specific = answer.get("hookSpecificOutput")
    if isinstance(specific, dict) and isinstance(specific.get("additionalContext"), str):
        context = specific["additionalContext"]
    elif isinstance(answer.get("additionalContext"), str):
        context = str(answer["additionalContext"])
    if not stop and context is None:
        return None
    reason = "; ".join(reasons) or (f"stopped by hook {label!r}" if stop else None)
    return PostToolBatchOutput(additional_context=context, stop=stop, stop_reason=reason)
