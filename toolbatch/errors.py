"""Errors raised by toolbatch.

Every error derives from one root, so callers can catch everything toolbatch raises with
``except ToolbatchError``. Leaves are named for what went wrong and carry their context as
attributes; messages show the offending value and say how to fix it.

```
ToolbatchError
├── ConfigError                 a bad option or configuration value (also a ValueError)
│   └── McpConfigError          a bad mcpServers document (.server, .key)
├── ArtifactError               the artifact store could not keep some output
│   ├── ArtifactCapExceeded     a per-file or per-store byte cap (.cap, .limit, .requested)
│   └── ArtifactWriteError      both the primary and the fallback directory failed
│                               (.primary_error, .fallback_error)
├── ToolRegistrationError       a tool or producer could not be registered (.name)
├── McpError                    an MCP server failed (.server)
├── ModelError                  a model API failed or answered nonsense (.status)
│   └── ReplyShapeError         a reply that is no shape of that API's replies (.api;
│                               also a ValueError)
├── RecorderError               the transcript could not be written or read (.path, .turn)
├── TurnAlreadyCompleted        complete_turn was given a turn it already completed (also a
│                               RuntimeError)
└── SessionHostError            a remote session (toolbatch.ray) could not be opened or
                                used (.session_id)
```

Errors that concern one tool call never escape ``ToolScheduler.run_batch``: they become
error responses in the call's place. The exceptions above are for the embedding program:
configuration, start-up, and direct use of the lower layers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

__all__ = [
    "ArtifactCapExceeded",
    "ArtifactError",
    "ArtifactWriteError",
    "ConfigError",
    "McpConfigError",
    "McpError",
    "ModelError",
    "RecorderError",
    "ReplyShapeError",
    "SessionHostError",
    "ToolRegistrationError",
    "ToolbatchError",
    "TurnAlreadyCompleted",
]


class ToolbatchError(Exception):
    """The root of every error toolbatch raises."""


class ConfigError(ToolbatchError, ValueError):
    """A configuration value or option is invalid; the message names it and the fix."""


class McpConfigError(ConfigError):
    """An ``mcpServers`` document is invalid.

    Attributes:
        server: the server entry at fault (``None`` for the document as a whole).
        key: the key at fault inside that entry, if one is to blame.
    """

    def __init__(self, message: str, *, server: str | None = None, key: str | None = None):
        super().__init__(message)
        self.server = server
        self.key = key


class ArtifactError(ToolbatchError):
    """The artifact store could not keep some tool output on disk."""


class ArtifactCapExceeded(ArtifactError):
    """Writing would pass one of the store's byte caps; nothing was written.

    Attributes:
        cap: which cap: ``"file"`` (per file) or ``"total"`` (per store).
        limit: the cap in bytes.
        requested: the bytes the write needed (for ``"total"``: already used plus needed).
    """

    def __init__(self, cap: Literal["file", "total"], *, limit: int, requested: int):
        what = "per-file" if cap == "file" else "per-store"
        option = "max_file_bytes" if cap == "file" else "max_total_bytes"
        super().__init__(
            f"artifact needs {requested:,} bytes, over the store's {what} cap of {limit:,} "
            f"bytes; raise ArtifactStore({option}=...) to keep larger output"
        )
        self.cap: Literal["file", "total"] = cap
        self.limit = limit
        self.requested = requested


class ArtifactWriteError(ArtifactError):
    """The artifact could not be written: both directories failed, or a stream broke.

    Attributes:
        primary_error: why the primary directory failed.
        fallback_error: why the fallback directory failed, or ``None`` when it was not tried
            (a streaming write that broke midway cannot restart elsewhere).
        primary_dir: the primary directory.
        fallback_dir: the fallback directory.
    """

    def __init__(
        self,
        *,
        primary_dir: Path,
        primary_error: BaseException,
        fallback_dir: Path,
        fallback_error: BaseException | None,
    ):
        if fallback_error is None:
            message = (
                f"could not write the artifact to {str(primary_dir)!r} ({primary_error}); "
                f"free disk space or make the directory writable"
            )
        else:
            message = (
                f"could not write the artifact to {str(primary_dir)!r} ({primary_error}) nor "
                f"to the fallback {str(fallback_dir)!r} ({fallback_error}); make one of them "
                f"writable or pass ArtifactStore(fallback_dir=...)"
            )
        super().__init__(message)
        self.primary_dir = primary_dir
        self.primary_error = primary_error
        self.fallback_dir = fallback_dir
        self.fallback_error = fallback_error


class ToolRegistrationError(ToolbatchError):
    """A tool or producer could not be registered.

    Attributes:
        name: the tool name at fault.
    """

    def __init__(self, message: str, *, name: str | None = None):
        super().__init__(message)
        self.name = name


class McpError(ToolbatchError):
    """An MCP server could not be started, discovered or called.

    Attributes:
        server: the server's name in the ``mcpServers`` document.
    """

    def __init__(self, message: str, *, server: str):
        super().__init__(message)
        self.server = server


class ModelError(ToolbatchError):
    """A model API failed, or answered something that is not a reply of that API.

    Attributes:
        status: the HTTP status it answered, or ``None`` (unreachable, or a bad reply).
    """

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


class ReplyShapeError(ModelError, ValueError):
    """A model reply handed to ``toolbatch.providers`` is not any shape of that API's replies.

    Attributes:
        api: the API whose reply was expected (e.g. ``"a Chat Completions"``).
    """

    def __init__(self, message: str, *, api: str):
        super().__init__(message)
        self.api = api


class RecorderError(ToolbatchError):
    """A session transcript could not be written or read.

    Attributes:
        path: the transcript file.
        turn: when recording a completed turn failed, that turn (a ``toolbatch.Turn``):
            its tools ran, but it was not recorded, so a runtime can still show it.
    """

    def __init__(self, message: str, *, path: Path, turn: object = None):
        super().__init__(message)
        self.path = path
        self.turn = turn


class SessionHostError(ToolbatchError):
    """A remote session (``toolbatch.ray``) could not be opened, or its host is gone.

    A batch never raises it: a batch whose host was lost is answered with an error response
    per call. It is raised when a session cannot be opened, or is used after it was closed.

    Attributes:
        session_id: the session concerned.
    """

    def __init__(self, message: str, *, session_id: str):
        super().__init__(message)
        self.session_id = session_id


class TurnAlreadyCompleted(ToolbatchError, RuntimeError):
    """A turn was given to ``complete_turn`` a second time (a turn completes exactly once),
    or a response was added to a turn after its completion."""
