"""The shell producer's result: exit line, notes, content and display, and the exit status.

``ResultComposer`` turns a finished command (its ``Capture``, what was saved, its
``Ending``) into the ``ToolResult`` the model and the user get. The exit status travels as
data (``ToolResult.returncode``, kept on the response through finalizing), never read back
from the text: a command can print any line, an exit line included. ``without_exit_line``
drops the line this producer writes last (by position) for those that show the status
their own way.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeAlias

from toolbatch._core import Preview, ToolFailure, ToolResult, make_preview
from toolbatch.producers._capture import Capture, Kind, Saved, render
from toolbatch.sandbox import GroupStop, ProcessPolicy

__all__ = [
    "Ending",
    "Reason",
    "ResultComposer",
    "without_exit_line",
]

_DENIALS: Final = (b"permission denied", b"operation not permitted", b"read-only file system")
"""What a command prints when the sandbox (or anything else) refused it an access."""
_OFFLINE: Final = (
    b"could not resolve host",
    b"couldn't resolve host",
    b"network is unreachable",
    b"temporary failure in name resolution",
    b"unable to resolve host address",
    b"name or service not known",
    b"name resolution",
    b"failed to establish a new connection",
    b"no address associated with hostname",
)
"""What curl, wget, git, pip and friends print when there is no network."""
_OFFLINE_EXIT_CODES: Final = {"curl": (6, 7), "wget": (4,)}
"""curl 6/7 (cannot resolve, cannot connect) and wget 4 (network failure), even with ``-s``."""

Reason: TypeAlias = Literal["exited", "timeout", "cancelled"]


@dataclass(slots=True)
class Ending:
    timeout_s: float
    reason: Reason = "exited"
    returncode: int | None = None
    stop: GroupStop | None = None
    pipe_held: bool = False
    background_stopped: bool = False
    protected_created: tuple[Path, ...] = ()
    lost: str | None = None
    """Why the exit status is unknown (the sandbox's spawner or supervisor died), if so."""


def without_exit_line(output: str) -> str:
    """A shell call's ``output`` without the exit line this producer writes last.

    Only for a response whose ``returncode`` is set (the command exited, so its output ends
    with that line, which finalizing keeps in the tail). The line is dropped by its position,
    never recognised by its text: an exit line the command printed itself stays output.
    """
    head, _, _ = output.rpartition("\n")
    return head + "\n" if head else ""


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return f"signal {number}"


@dataclass(frozen=True, slots=True)
class ResultComposer:
    """Composes a finished command's ``ToolResult`` from its capture and its ending.

    Attributes:
        preview_chars: the size of the model preview over the trigger.
        display_window: the size of the user display window over the trigger, in bytes.
        kill_grace_s: the grace between SIGTERM and SIGKILL, named in the exit line.
        drain_s: how long output was read after the command ended, named in a note.
        max_timeout_s: the largest timeout a call may ask for, named in a timeout's error.
    """

    preview_chars: int
    display_window: int
    kill_grace_s: float
    drain_s: float
    max_timeout_s: float

    def result(
        self,
        kind: Kind,
        capture: Capture,
        saved: Saved,
        ending: Ending,
        policy: ProcessPolicy | None,
        command: str,
    ) -> ToolResult:
        shown = render(
            kind,
            capture,
            saved,
            preview_chars=self.preview_chars,
            display_window=self.display_window,
        )
        exit_line = self._exit_line(ending)
        notes = [*shown.notes, *self._ending_notes(ending)]
        failed = ending.reason == "exited" and ending.returncode != 0
        if policy is not None and policy.sandbox != "off" and failed:
            if capture.mentions(_DENIALS):
                # The refusal the command printed may be the sandbox's: say which one applied.
                notes.append(f"[{policy.describe()}]")
            if not policy.network and (
                capture.mentions(_OFFLINE) or _offline_exit(command, ending.returncode)
            ):
                notes.append(
                    "[the network is off in this sandbox, which may be why the command "
                    "failed; the user can allow it with network=True (toolbatch run "
                    "--network)]"
                )
        preview = None
        if shown.excerpt is not None:
            # Notes and the exit line stay last in the preview, however it is cut later.
            trailer = "".join(f"{note}\n" for note in notes) + exit_line
            paths = [str(path) for path in shown.persisted_output_files or ()]
            excerpt = dataclasses.replace(shown.excerpt, trailer=trailer)
            preview = make_preview(excerpt, self.preview_chars, paths=paths)
            content = preview.text
        else:
            content = _compose(shown.content, notes, exit_line)
        if shown.display_lead is None and shown.display == shown.content:
            display = content
        else:
            lead = [shown.display_lead] if shown.display_lead is not None else []
            display = _compose(shown.display, [*lead, *notes], exit_line)
        return self._finish(
            content,
            display,
            ending,
            persisted_output_files=shown.persisted_output_files,
            preview=preview,
        )

    def _finish(
        self,
        content: str,
        display: str,
        ending: Ending,
        *,
        persisted_output_files: tuple[Path, ...] | None,
        preview: Preview | None = None,
    ) -> ToolResult:
        error = None
        if ending.reason == "timeout":
            error = ToolFailure(
                type="timeout",
                message=(
                    f"command timed out after {ending.timeout_s:g} s and was stopped; its "
                    f"partial output is in 'output'. Pass a larger 'timeout' (at most "
                    f"{self.max_timeout_s:g} s) or make the command finish sooner"
                ),
            )
        elif ending.reason == "cancelled":
            error = ToolFailure(
                type="cancelled",
                message="command was cancelled and stopped; its partial output is in 'output'",
            )
        elif ending.lost is not None:
            error = ToolFailure(
                type="execution_failed",
                message=f"{ending.lost}; its output is in 'output'",
            )
        exited = ending.reason == "exited" and ending.lost is None
        return ToolResult(
            content=content,
            display=display,
            error=error,
            persisted_output_files=persisted_output_files,
            preview=preview,
            returncode=ending.returncode if exited else None,
        )

    def _exit_line(self, ending: Ending) -> str:
        if ending.reason == "timeout":
            return f"[timed out after {ending.timeout_s:g} s; {self._stopped(ending.stop)}]"
        if ending.reason == "cancelled":
            return f"[cancelled; {self._stopped(ending.stop)}]"
        code = ending.returncode
        if code is None:
            return "[exit status unknown]"
        if code < 0:
            return f"[killed by signal {_signal_name(-code)}]"
        if 128 < code <= 128 + 64:
            try:
                name = signal.Signals(code - 128).name
            except ValueError:
                pass
            else:
                return f"[exit code: {code} (128+{code - 128}: a command was killed by {name})]"
        return f"[exit code: {code}]"

    def _stopped(self, stop: GroupStop | None) -> str:
        if stop is None or not (stop.terminated or stop.killed):
            return "the command had already ended"
        if stop.terminated and stop.killed:
            return f"its processes were sent SIGTERM, then SIGKILL after {self.kill_grace_s:g} s"
        if stop.killed:
            return "its processes were sent SIGKILL"
        return "its processes were stopped with SIGTERM"

    def _ending_notes(self, ending: Ending) -> list[str]:
        notes = []
        if ending.protected_created:
            names = ", ".join(str(path) for path in ending.protected_created)
            notes.append(
                f"[the command created {names}, protected in this sandbox (the host or git "
                f"would run what it holds); it was removed]"
            )
        if ending.pipe_held:
            notes.append(
                f"[output was read for {self.drain_s:g} s after the command ended, then "
                f"dropped: a background process kept the output pipe open]"
            )
        if ending.background_stopped:
            notes.append("[processes the command left running in the background were stopped]")
        return notes


def _offline_exit(command: str, returncode: int | None) -> bool:
    """Whether ``returncode`` is curl's or wget's own "no network" code for this command."""
    words = command.split()
    for program, codes in _OFFLINE_EXIT_CODES.items():
        if returncode in codes and any(os.path.basename(word) == program for word in words):
            return True
    return False


def _compose(body: str, notes: list[str], exit_line: str) -> str:
    """``body``, then ``notes``, then ``exit_line`` last, one per line."""
    pieces = [body]
    if body and not body.endswith("\n"):
        pieces.append("\n")
    pieces.extend(f"{note}\n" for note in notes)
    pieces.append(exit_line)
    return "".join(pieces)
