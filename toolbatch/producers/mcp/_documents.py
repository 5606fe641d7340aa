"""Reading an MCP config document: inline JSON, a JSON or TOML file (``/dev/fd/N`` too),
Codex's ``[mcp_servers.NAME]`` tables as an ``mcpServers`` document, and dotenv files
(``envFile``). What the entries mean is ``_config.py``'s.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from toolbatch._core import JsonTooDeep, check_json_depth
from toolbatch.errors import McpConfigError

__all__ = ["from_codex", "parse_inline", "read_document", "read_env_file"]


def parse_inline(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpConfigError(
            f"the MCP config looks like inline JSON but is not valid: {exc.msg} at column "
            f"{exc.colno}; quote it for the shell, or pass a file path"
        ) from exc


def read_document(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise McpConfigError(
            f"cannot read the MCP config file {str(path)!r}: {exc.strerror or exc}; "
            f"pass an existing JSON or TOML file, or the JSON document itself"
        ) from exc
    except UnicodeDecodeError as exc:
        raise McpConfigError(
            f"the MCP config file {str(path)!r} is not UTF-8 text (byte "
            f"{exc.object[exc.start]:#04x} at offset {exc.start:,}); save it as UTF-8 JSON"
        ) from None
    if path.suffix == ".toml":
        return _parse_toml(path, text)
    try:
        check_json_depth(text)
        return json.loads(text)
    except JsonTooDeep as exc:
        raise McpConfigError(f"the MCP config file {str(path)!r} is refused: {exc}") from None
    except json.JSONDecodeError as exc:
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            document = None
        if isinstance(document, dict) and "mcp_servers" in document:
            return document  # Codex's config.toml, under another name (or from /dev/fd)
        raise McpConfigError(
            f"the MCP config file {str(path)!r} is not valid JSON: {exc.msg} at line "
            f"{exc.lineno} column {exc.colno} (nor Codex's TOML with [mcp_servers.NAME] "
            f"tables)"
        ) from exc


def _parse_toml(path: Path, text: str) -> Any:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise McpConfigError(f"the MCP config file {str(path)!r} is not valid TOML: {exc}") from exc
    if "mcp_servers" not in document:
        raise McpConfigError(
            f"the TOML file {str(path)!r} has no [mcp_servers.NAME] table; write Codex's "
            f'[mcp_servers.docs] with command = "..." (or url = "...")',
            key="mcp_servers",
        )
    return document


_CODEX_DROPPED: Final = frozenset({"required"})


def from_codex(entries: Any) -> dict[str, Any]:
    """Codex's ``[mcp_servers.NAME]`` tables as an ``mcpServers`` document.

    ``url`` is streamable HTTP; ``bearer_token_env_var``, ``http_headers`` and
    ``env_http_headers`` become ``headers`` (the variables filled in at load, like any
    ``${VAR}``); ``env_vars`` passes those variables through to a stdio server. The shared
    keys (``enabled``, ``startup_timeout_sec``, ``tool_timeout_sec``, ``enabled_tools``,
    ``disabled_tools``) are read as they are; ``required`` is accepted and has no effect
    (every server that fails is named in its tools' errors).
    """
    if not isinstance(entries, Mapping):
        raise McpConfigError(
            f"'mcp_servers' must be a table of [mcp_servers.NAME] entries, got {entries!r:.80}",
            key="mcp_servers",
        )
    servers: dict[str, Any] = {}
    for name, raw in entries.items():
        if not isinstance(raw, Mapping):
            servers[name] = raw  # reported by the entry check, naming the server
            continue
        entry = {key: value for key, value in raw.items() if key not in _CODEX_DROPPED}
        headers: dict[str, Any] = {}
        plain = entry.pop("http_headers", None)
        if isinstance(plain, Mapping):
            headers.update(plain)
        from_env = entry.pop("env_http_headers", None)
        if isinstance(from_env, Mapping):
            headers.update({header: f"${{{var}}}" for header, var in from_env.items()})
        token_var = entry.pop("bearer_token_env_var", None)
        if isinstance(token_var, str) and token_var:
            headers["Authorization"] = f"Bearer ${{{token_var}}}"
        if headers:
            entry["headers"] = headers
        passed = entry.pop("env_vars", None)
        if isinstance(passed, list):
            env = dict(entry.get("env") or {})
            for var in passed:
                if isinstance(var, str):
                    env.setdefault(var, f"${{{var}}}")
            entry["env"] = env
        if "url" in entry and "type" not in entry:
            entry["type"] = "http"
        servers[name] = entry
    return {"mcpServers": servers}


def read_env_file(path: str, *, cwd: str | None) -> dict[str, str]:
    """The variables of a dotenv file: ``NAME=value`` lines, ``#`` comments, ``export``.

    Quotes around a value are removed (``"..."`` also unescapes ``\\n``); nothing else is
    interpreted (no ``$`` expansion).

    Raises:
        OSError: the file cannot be read.
    """
    resolved = Path(path).expanduser()
    if not resolved.is_absolute():
        resolved = Path(cwd or os.getcwd()) / resolved
    variables: dict[str, str] = {}
    for line in resolved.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        text = text.removeprefix("export ").lstrip()
        key, equals, value = text.partition("=")
        key = key.strip()
        if not equals or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            quoted = value[1:-1]
            value = quoted.replace("\\n", "\n") if value[0] == '"' else quoted
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        variables[key] = value
    return variables
