"""The ``mcpServers`` document: stdio and streamable HTTP servers, validated with clear errors.

The shape is the one Claude Code, Qwen Code, Gemini CLI and Cursor read::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "${TOKEN}"},
                  "cwd": "/work", "timeout": 30000},
        "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}}
    }}

``timeout`` is in milliseconds. ``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``,
``env``, ``cwd``, ``url`` and ``headers`` are replaced from the loading process's environment
when the document is loaded; this is how a server receives a secret, since stdio servers do
not inherit the agent's environment (see ``DEFAULT_INHERITED_ENV_VARS``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolbatch.errors import McpConfigError

__all__ = [
    "HttpServerConfig",
    "McpConfig",
    "ServerConfig",
    "StdioServerConfig",
    "load_mcp_config",
]

_ENTRY_CONFIG: Final = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
_VARIABLE: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

PositiveMs: TypeAlias = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class StdioServerConfig(BaseModel):
    """A server started as a subprocess, speaking JSON-RPC lines on stdin/stdout.

    Attributes:
        command: the executable (looked up on the server's ``PATH``).
        args: its arguments.
        env: variables added to the default environment (``DEFAULT_INHERITED_ENV_VARS``).
        cwd: the working directory (default: the agent's).
        timeout: the per-call timeout in milliseconds (default: ``McpServers``'s).
    """

    model_config = _ENTRY_CONFIG

    type: Literal["stdio"] | None = None
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    timeout: PositiveMs | None = None

    @property
    def timeout_s(self) -> float | None:
        """``timeout`` in seconds, or ``None`` when the entry sets none."""
        return None if self.timeout is None else self.timeout / 1000


class HttpServerConfig(BaseModel):
    """A server reached over streamable HTTP.

    Attributes:
        url: the endpoint (Gemini CLI and Qwen Code spell the key ``httpUrl``; both work).
        headers: sent with every request (for example ``Authorization``).
        timeout: the per-call timeout in milliseconds (default: ``McpServers``'s).
    """

    model_config = _ENTRY_CONFIG

    type: Literal["http", "streamable-http", "streamableHttp"] | None = None
    url: str = Field(min_length=1, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: PositiveMs | None = None

    @property
    def timeout_s(self) -> float | None:
        """``timeout`` in seconds, or ``None`` when the entry sets none."""
        return None if self.timeout is None else self.timeout / 1000


ServerConfig: TypeAlias = StdioServerConfig | HttpServerConfig
"""One entry of ``mcpServers``."""


class McpConfig(BaseModel):
    """A validated ``mcpServers`` document: server name to entry, in document order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    servers: dict[str, StdioServerConfig | HttpServerConfig] = Field(default_factory=dict)


def load_mcp_config(source: Mapping[str, Any] | str | os.PathLike[str]) -> McpConfig:
    """Validate an ``{"mcpServers": {...}}`` document given as a mapping or a JSON file path.

    Keys beside ``mcpServers`` are ignored, so a whole settings file can be passed.

    Raises:
        McpConfigError: the document or an entry is invalid; ``.server`` and ``.key`` name
            the place and the message says how to fix it.
    """
    if isinstance(source, Mapping):
        document: Any = source
    elif isinstance(source, str | os.PathLike):
        document = _read_document(Path(source))
    else:
        raise McpConfigError(
            f"an MCP config is a mapping or the path of a JSON file, got {type(source).__name__}"
        )
    if not isinstance(document, Mapping):
        raise McpConfigError(
            f'the MCP config must be a JSON object like {{"mcpServers": {{...}}}}, '
            f"got {type(document).__name__}"
        )
    if "mcpServers" not in document:
        near = [key for key in document if str(key).lower() == "mcpservers"]
        hint = f" (found {near[0]!r}: the key is case-sensitive)" if near else ""
        raise McpConfigError(
            f'the MCP config has no "mcpServers" key{hint}; '
            f'write {{"mcpServers": {{"<name>": {{"command": ...}}}}}}',
            key="mcpServers",
        )
    entries = document["mcpServers"]
    if not isinstance(entries, Mapping):
        raise McpConfigError(
            f'"mcpServers" must be an object of server name to entry, got {entries!r:.80}',
            key="mcpServers",
        )
    servers: dict[str, ServerConfig] = {}
    for name, entry in entries.items():
        if not isinstance(name, str) or not name.strip():
            raise McpConfigError(
                f"an MCP server name must be a non-empty string, got {name!r}", server=str(name)
            )
        servers[name] = _parse_entry(name, entry)
    return McpConfig(servers=servers)


def _read_document(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise McpConfigError(
            f"cannot read the MCP config file {str(path)!r}: {exc.strerror or exc}; "
            f"pass an existing JSON file or the document itself"
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(
            f"the MCP config file {str(path)!r} is not valid JSON: {exc.msg} at line "
            f"{exc.lineno} column {exc.colno}"
        ) from exc


def _parse_entry(name: str, entry: Any) -> ServerConfig:
    if not isinstance(entry, Mapping):
        raise McpConfigError(
            f"MCP server {name!r} must be an object with 'command' (stdio) or 'url' (HTTP), "
            f"got {entry!r:.80}",
            server=name,
        )
    raw = dict(entry)
    kind = raw.get("type")
    if kind == "sse":
        raise McpConfigError(
            f"MCP server {name!r}: the SSE transport is not supported; "
            f"use the server's streamable HTTP endpoint with 'url'",
            server=name,
            key="type",
        )
    if "httpUrl" in raw:
        if "url" in raw:
            raise McpConfigError(
                f"MCP server {name!r} sets both 'url' and 'httpUrl'; keep one",
                server=name,
                key="httpUrl",
            )
        raw["url"] = raw.pop("httpUrl")
    is_http = "url" in raw or kind in ("http", "streamable-http", "streamableHttp")
    if not is_http and "command" not in raw:
        raise McpConfigError(
            f"MCP server {name!r} has neither 'command' (a stdio server) nor 'url' "
            f"(a streamable HTTP server); add one",
            server=name,
            key="command",
        )
    if "url" in raw and "command" in raw:
        raise McpConfigError(
            f"MCP server {name!r} sets both 'command' and 'url'; a server is either stdio "
            f"(command) or HTTP (url)",
            server=name,
            key="url",
        )
    model: type[StdioServerConfig] | type[HttpServerConfig] = (
        HttpServerConfig if is_http else StdioServerConfig
    )
    try:
        parsed = model.model_validate(raw)
    except ValidationError as exc:
        raise _entry_error(name, model, exc) from None
    return _expand(name, parsed)


def _entry_error(
    name: str, model: type[StdioServerConfig] | type[HttpServerConfig], exc: ValidationError
) -> McpConfigError:
    error = exc.errors()[0]
    location = error["loc"]
    key = str(location[0]) if location else None
    where = ".".join(str(part) for part in location)
    kind = "stdio" if model is StdioServerConfig else "HTTP"
    allowed = ", ".join(sorted(model.model_fields))
    if error["type"] == "extra_forbidden":
        message = f"MCP server {name!r} has an unknown key {key!r}; a {kind} entry takes {allowed}"
    elif error["type"] == "missing":
        message = f"MCP server {name!r} is missing {key!r}"
    else:
        message = (
            f"MCP server {name!r}: {where!r} is invalid ({error['msg']}), "
            f"got {error.get('input')!r:.80}"
        )
        if key == "timeout":
            message += "; 'timeout' is a positive number of milliseconds"
    return McpConfigError(message, server=name, key=key)


def _expand(name: str, entry: ServerConfig) -> ServerConfig:
    def sub(key: str, value: str) -> str:
        def replace(match: re.Match[str]) -> str:
            variable, default = match.group(1), match.group(2)
            found = os.environ.get(variable)
            if found is not None and (found or default is None):
                return found
            if default is not None:
                return default
            raise McpConfigError(
                f"MCP server {name!r}: {key!r} refers to ${{{variable}}}, which is not set in "
                f"the environment; set it or write ${{{variable}:-default}}",
                server=name,
                key=key,
            )

        return _VARIABLE.sub(replace, value) if "${" in value else value

    if isinstance(entry, StdioServerConfig):
        return entry.model_copy(
            update={
                "command": sub("command", entry.command),
                "args": [sub("args", arg) for arg in entry.args],
                "env": {k: sub("env", v) for k, v in entry.env.items()},
                "cwd": None if entry.cwd is None else sub("cwd", entry.cwd),
            }
        )
    return entry.model_copy(
        update={
            "url": sub("url", entry.url),
            "headers": {k: sub("headers", v) for k, v in entry.headers.items()},
        }
    )
