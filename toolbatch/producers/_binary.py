"""Binary output: persisted once as an artifact, described to the model in one line.

Bytes are never decoded as text (``b"\\x89PNG"`` must not become ``"\\ufffdPNG"``). A
Python tool that returns ``bytes`` and an MCP server that embeds a binary resource both
end here: the bytes go to the artifact store through its streaming writer (binary, within
its caps), and the model is told the size, the kind when the magic number gives it away
(PNG, JPEG, GIF, WebP, PDF, gzip, zip) and where the file is, as the shell does for binary
output.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import structlog

from toolbatch._core import ToolCall
from toolbatch.artifacts import ArtifactStore, commit_within, persist_deadline

__all__ = ["SavedBinary", "persist_binary"]

log = structlog.get_logger("toolbatch.producers.binary")


@dataclass(frozen=True, slots=True)
class SavedBinary:
    """Where binary output went.

    Attributes:
        total_bytes: how many bytes there were.
        path: the artifact (``None``: not saved; ``problem`` says why).
        kept_bytes: how many of them the artifact holds (fewer when a cap stopped it).
        cap: the store cap that stopped it, if one did.
        problem: why nothing was saved.
    """

    total_bytes: int
    path: Path | None = None
    kept_bytes: int = 0
    cap: Literal["file", "total"] | None = None
    problem: str | None = None

    @property
    def files(self) -> tuple[Path, ...]:
        """``(path,)`` or ``()``: the result's ``persisted_output_files``."""
        return () if self.path is None else (self.path,)

    def where(self) -> str:
        """Where the bytes are, for the model: ``saved to: <path>`` or why not."""
        if self.path is None:
            return f"it was not saved to a file ({self.problem})"
        unsaved = self.total_bytes - self.kept_bytes
        if unsaved > 0:
            which = "per-file" if self.cap == "file" else "total"
            return (
                f"its first {self.kept_bytes:,} bytes were saved to: {self.path} ({unsaved:,} "
                f"bytes were not saved: the artifact store's {which} cap)"
            )
        return f"saved to: {self.path}"


async def persist_binary(
    data: bytes,
    *,
    call: ToolCall,
    store: ArtifactStore | None,
    suffix: str = ".bin",
    deadline: float | None = None,
) -> SavedBinary:
    """Write ``data`` once to ``store`` as ``<tool>-<call id>-<digest><suffix>``.

    ``deadline`` (anyio clock; see ``toolbatch.artifacts.persist_deadline``) bounds the
    wait: past it the bytes are described as not saved, and the write under way is
    removed in the background.
    """
    if store is None:
        return SavedBinary(len(data), problem="no artifact store is configured")
    async with store.open_stream(call.id, call.name, suffix=suffix) as stream:
        until = persist_deadline(deadline)
        with anyio.move_on_after(until - anyio.current_time()):
            await stream.write(data)
        saved = await commit_within(stream, deadline=until)
    if not isinstance(saved, Path):
        log.warning("binary.persist_failed", call_id=call.id, bytes=len(data), error=saved)
        return SavedBinary(len(data), problem=f"saving it failed: {saved}")
    return SavedBinary(len(data), path=saved, kept_bytes=stream.bytes_kept, cap=stream.dropped_by)
