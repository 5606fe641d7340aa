"""The ``mcpServers`` document, read leniently in the shapes every common agent writes.

One reader for the configs people already have (sources: shared/reference/ecosystem-2.md
section 3, from each tool's own documentation):

* **Claude Code** (``.mcp.json``, ``~/.claude.json``): ``{"mcpServers": {name: entry}}``,
  ``type`` ``stdio`` (default) | ``http`` | ``sse``, ``timeout`` in ms.
* **Qwen Code / Gemini CLI** (``settings.json``): ``command`` (stdio), ``url`` (SSE there),
  ``httpUrl`` (streamable HTTP), ``trust``, ``includeTools``, ``excludeTools``, ``cwd``.
* **Cursor** (``.cursor/mcp.json``): ``envFile``, ``${env:NAME}``, ``${userHome}``,
  ``${workspaceFolder}``.
* **Cline** (``cline_mcp_settings.json``): ``disabled``, ``alwaysAllow`` / ``autoApprove``,
  ``type`` ``streamableHttp`` (legacy ``transportType``).
* **VS Code** (``.vscode/mcp.json``): the top-level key is ``servers``; ``type: "http"``
  tries streamable HTTP, then SSE.
* **Codex** names borrowed: ``startup_timeout_sec`` / ``startup_timeout_ms``,
  ``tool_timeout_sec``, ``enabled``, ``enabled_tools``, ``disabled_tools``.

A bare ``url`` means streamable HTTP in Claude Code and Cursor but SSE in Gemini CLI, Qwen
Code and Cline, so it tries streamable HTTP first and falls back to SSE. A key none of them
defines (or one toolbatch does not implement, such as ``oauth``) is a warning naming it
(``mcp.config_key_ignored``), never an error: one stray key must not take every server
down. Disabled servers and servers on a transport toolbatch lacks (``ws``) are kept aside in
``McpConfig.unavailable`` with the reason, so a call to one of their tools says why.
Wrong *values* (a ``command`` that is not a string, a negative timeout) are still errors
that name the server and the key.

``${VAR}``, ``${VAR:-default}`` and ``${env:VAR}`` in ``command``, ``args``, ``env``,
``cwd``, ``url``, ``headers`` and ``envFile`` are filled in from the environment when the
document is loaded; an unset variable without a default stays as written, with a warning
(Claude Code's rule). An ``env`` value that is exactly ``$VAR`` is expanded too (Gemini
CLI and Qwen Code write it so). This is how a server receives a secret: stdio servers do
not inherit the agent's environment (see ``DEFAULT_INHERITED_ENV_VARS``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeAlias

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolbatch.errors import McpConfigError
from toolbatch.producers.mcp._documents import from_codex, parse_inline, read_document

__all__ = [
    "MIN_CALL_TIMEOUT_MS",
    "HttpServerConfig",
    "HttpTransport",
    "McpConfig",
    "ServerConfig",
    "StdioServerConfig",
    "load_mcp_config",
    "merge_mcp_configs",
]

log = structlog.get_logger("toolbatch.mcp")

_ENTRY_CONFIG: Final = ConfigDict(
    frozen=True, extra="forbid", defer_build=True, populate_by_name=True
)
_VARIABLE: Final = re.compile(
    r"\$\{(userHome|workspaceFolder)\}|\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}"
)
_WHOLE_DOLLAR_VARIABLE: Final = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
MIN_CALL_TIMEOUT_MS: Final = 1000
"""A per-server ``timeout`` under this is ignored (Claude Code's rule; Cline writes seconds)."""

PositiveMs: TypeAlias = Annotated[float, Field(gt=0, allow_inf_nan=False)]
PositiveS: TypeAlias = Annotated[float, Field(gt=0, allow_inf_nan=False)]
HttpTransport: TypeAlias = Literal["streamable-http", "sse", "auto"]
"""``auto``: streamable HTTP first, SSE when the server does not speak it."""


class _ServerOptions(BaseModel):
    """What every entry may set beside its transport."""

    model_config = _ENTRY_CONFIG

    timeout: PositiveMs | None = None
    startup_timeout_s: PositiveS | None = None
    include_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()
    trust: bool = False
    auto_approve: tuple[str, ...] = ()
    description: str | None = None

    @property
    def timeout_s(self) -> float | None:
        """``timeout`` in seconds, or ``None`` when the entry sets none."""
        return None if self.timeout is None else self.timeout / 1000

    def offers(self, tool: str) -> bool:
        """Whether the filters keep ``tool`` (``excludeTools`` wins over ``includeTools``)."""
        if _listed(tool, self.exclude_tools):
            return False
        return self.include_tools is None or _listed(tool, self.include_tools)

    def auto_approves(self, tool: str) -> bool:
        """Whether calls to ``tool`` skip permission asks (``trust`` or ``alwaysAllow``)."""
        return self.trust or tool in self.auto_approve


def _listed(tool: str, names: tuple[str, ...]) -> bool:
    # Gemini CLI also accepts "tool(args...)" in these lists: the name before "(" counts.
    return any(name == tool or name.startswith(f"{tool}(") for name in names)


class StdioServerConfig(_ServerOptions):
    """A server started as a subprocess, speaking JSON-RPC lines on stdin/stdout.

    Attributes:
        command: the executable (looked up on the server's ``PATH``).
        args: its arguments.
        env: variables added to the default environment (``DEFAULT_INHERITED_ENV_VARS``),
            over those of ``env_file``.
        env_file: a dotenv file read when the server starts (Cursor's and VS Code's
            ``envFile``); relative to ``cwd``, else the agent's working directory.
        cwd: the working directory (default: the agent's).
        timeout: the per-call timeout in milliseconds (default: ``McpServers``'s).
        startup_timeout_s: how long start-up may take (default: ``McpServers``'s).
        include_tools / exclude_tools: which tools are offered (exclude wins).
        trust: calls to its tools skip permission asks (deny rules still hold).
        auto_approve: tools whose calls skip permission asks (Cline's ``alwaysAllow``).
    """

    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    env_file: str | None = None
    cwd: str | None = None


class HttpServerConfig(_ServerOptions):
    """A server reached over HTTP: streamable HTTP, legacy HTTP+SSE, or either.

    Attributes:
        url: the endpoint (``httpUrl``, ``url`` and ``serverUrl`` all land here).
        transport: ``streamable-http``, ``sse`` or ``auto`` (streamable HTTP, then SSE).
        headers: sent with every request (for example ``Authorization``).
    """

    type: Literal["http"] = "http"
    url: str = Field(min_length=1, pattern=r"^https?://")
    transport: HttpTransport = "auto"
    headers: dict[str, str] = Field(default_factory=dict)


ServerConfig: TypeAlias = StdioServerConfig | HttpServerConfig
"""One entry of ``mcpServers``."""


class McpConfig(BaseModel):
    """A checked ``mcpServers`` document.

    Attributes:
        servers: the servers to start, by name, in document order.
        unavailable: servers that are configured but will not be started (disabled, or on
            a transport toolbatch does not support), with the reason.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    servers: dict[str, StdioServerConfig | HttpServerConfig] = Field(default_factory=dict)
    unavailable: dict[str, str] = Field(default_factory=dict)


# The keys toolbatch reads. Any other key, even one another agent defines (oauth, alwaysLoad),
# gets a warning naming it: the user may rely on it, and here it has no effect.
_TRANSPORT_KEYS: Final = frozenset(
    {"type", "transportType", "command", "url", "httpUrl", "serverUrl"}
)
_STDIO_KEYS: Final = frozenset({"args", "env", "envFile", "cwd"})
_HTTP_KEYS: Final = frozenset({"headers"})
_OPTION_KEYS: Final = frozenset(
    {
        "timeout",
        "tool_timeout_sec",
        "startup_timeout_sec",
        "startup_timeout_ms",
        "discoveryTimeoutMs",
        "includeTools",
        "excludeTools",
        "enabled_tools",
        "disabled_tools",
        "trust",
        "alwaysAllow",
        "autoApprove",
        "disabled",
        "enabled",
        "description",
    }
)
_TYPE_ALIASES: Final[Mapping[str, str]] = {
    "stdio": "stdio",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamableHttp": "streamable-http",
    "streamable_http": "streamable-http",
    "sse": "sse",
}


def load_mcp_config(source: McpConfig | Mapping[str, Any] | str | os.PathLike[str]) -> McpConfig:
    """Read an MCP config given as a mapping, a JSON string, or a file path.

    The servers are under ``mcpServers`` (Claude Code, Qwen Code, Gemini CLI, Cursor, Cline),
    ``servers`` (VS Code) or ``mcp_servers`` (Codex's ``config.toml``); keys beside them are
    ignored, so a whole settings file can be passed. A string starting with ``{`` is the JSON
    document itself (as Claude Code's ``--mcp-config`` takes it); anything else is a path,
    read once (so ``/dev/fd/N`` from a shell's ``<(...)`` works): JSON, or TOML for a
    ``.toml`` file or a file that is not JSON but is Codex's TOML.

    Raises:
        McpConfigError: the document or an entry is invalid; ``.server`` and ``.key`` name
            the place and the message says how to fix it.
    """
    if isinstance(source, McpConfig):
        return source
    if isinstance(source, Mapping):
        document: Any = source
    elif isinstance(source, str) and source.lstrip().startswith("{"):
        document = parse_inline(source)
    elif isinstance(source, str | os.PathLike):
        document = read_document(Path(source).expanduser())
    else:
        raise McpConfigError(
            f"an MCP config is a mapping, a JSON string or the path of a JSON or TOML file, "
            f"got {type(source).__name__}"
        )
    if not isinstance(document, Mapping):
        raise McpConfigError(
            f'the MCP config must be a JSON object like {{"mcpServers": {{...}}}}, '
            f"got {type(document).__name__}"
        )
    if "mcpServers" not in document and "servers" not in document and "mcp_servers" in document:
        document = from_codex(document["mcp_servers"])
    vscode = "mcpServers" not in document and isinstance(document.get("servers"), Mapping)
    key = "servers" if vscode else "mcpServers"
    if key not in document:
        near = [k for k in document if str(k).lower() == "mcpservers"]
        hint = f" (found {near[0]!r}: the key is case-sensitive)" if near else ""
        raise McpConfigError(
            f'the MCP config has no "mcpServers" key{hint}; '
            f'write {{"mcpServers": {{"<name>": {{"command": ...}}}}}} '
            f'(VS Code\'s {{"servers": {{...}}}} works too)',
            key="mcpServers",
        )
    entries = document[key]
    if not isinstance(entries, Mapping):
        raise McpConfigError(
            f"{key!r} must be an object of server name to entry, got {entries!r:.80}",
            key=key,
        )
    servers: dict[str, ServerConfig] = {}
    unavailable: dict[str, str] = {}
    for name, entry in entries.items():
        if not isinstance(name, str) or not name.strip():
            raise McpConfigError(
                f"an MCP server name must be a non-empty string, got {name!r}", server=str(name)
            )
        parsed = _parse_entry(name, entry, vscode=vscode)
        if isinstance(parsed, str):
            unavailable[name] = parsed
            log.info("mcp.server_skipped", server=name, reason=parsed)
        else:
            servers[name] = parsed
    return McpConfig(servers=servers, unavailable=unavailable)


def merge_mcp_configs(*configs: McpConfig) -> McpConfig:
    """Several documents as one: a later document's entry replaces an earlier one of the same
    name whole (Claude Code takes each entry from one source, never merging fields)."""
    servers: dict[str, ServerConfig] = {}
    unavailable: dict[str, str] = {}
    for config in configs:
        for name in (*config.servers, *config.unavailable):
            servers.pop(name, None)
            unavailable.pop(name, None)
        servers.update(config.servers)
        unavailable.update(config.unavailable)
    return McpConfig(servers=servers, unavailable=unavailable)


def _parse_entry(name: str, entry: Any, *, vscode: bool) -> ServerConfig | str:
    """The entry, or why it is not started (a ``str``)."""
    if not isinstance(entry, Mapping):
        raise McpConfigError(
            f"MCP server {name!r} must be an object with 'command' (stdio) or 'url' (HTTP), "
            f"got {entry!r:.80}",
            server=name,
        )
    raw = dict(entry)
    if raw.get("disabled") is True or raw.get("enabled") is False:
        key = "disabled" if raw.get("disabled") is True else "enabled"
        return f"MCP server {name!r} is disabled in the MCP config ({key!r} is {raw[key]!r})"
    kind, url = _transport(name, raw, vscode=vscode)
    if kind == "unsupported":
        return (
            f"MCP server {name!r} uses the {raw.get('type')!r} transport, which toolbatch "
            f"does not support; use its stdio command or its HTTP endpoint"
        )
    is_http = kind != "stdio"
    allowed = _TRANSPORT_KEYS | _OPTION_KEYS | (_HTTP_KEYS if is_http else _STDIO_KEYS)
    ignored = sorted(str(key) for key in raw if key not in allowed)
    if ignored:
        # Named one by one: a user looking for why "oauth" or "argv" had no effect finds it.
        log.warning(
            "mcp.config_key_ignored",
            server=name,
            keys=ignored,
            hint="toolbatch does not use these keys" + ("" if is_http else " on a stdio server"),
        )
    fields: dict[str, Any] = _options(name, raw)
    if is_http:
        fields.update(url=url, transport=kind, headers=raw.get("headers", {}))
        model: type[StdioServerConfig] | type[HttpServerConfig] = HttpServerConfig
    else:
        fields.update(
            command=raw["command"],
            args=raw.get("args", []),
            env=raw.get("env", {}),
            env_file=raw.get("envFile"),
            cwd=raw.get("cwd"),
        )
        model = StdioServerConfig
    fields = _expand(name, {key: value for key, value in fields.items() if value is not None})
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        raise _entry_error(name, model, exc) from None


def _transport(name: str, raw: dict[str, Any], *, vscode: bool) -> tuple[str, str | None]:
    """``stdio``, an ``HttpTransport`` or ``unsupported``, and the URL for HTTP ones."""
    declared = raw.get("type", raw.get("transportType"))
    if declared is not None and not isinstance(declared, str):
        raise McpConfigError(
            f"MCP server {name!r}: 'type' must be a string such as 'stdio', 'http' or 'sse', "
            f"got {declared!r}",
            server=name,
            key="type",
        )
    urls = {key: raw[key] for key in ("httpUrl", "url", "serverUrl") if key in raw}
    if len(urls) > 1:
        raise McpConfigError(
            f"MCP server {name!r} sets {' and '.join(map(repr, urls))}; keep one",
            server=name,
            key=next(iter(urls)),
        )
    if urls and "command" in raw:
        raise McpConfigError(
            f"MCP server {name!r} sets both 'command' and {next(iter(urls))!r}; a server is "
            f"either stdio (command) or HTTP (url)",
            server=name,
            key="url",
        )
    if declared is not None and declared not in _TYPE_ALIASES:
        if declared in ("ws", "websocket"):
            return "unsupported", None
        raise McpConfigError(
            f"MCP server {name!r} has an unknown 'type' {declared!r}; use 'stdio', 'http' "
            f"(streamable HTTP) or 'sse'",
            server=name,
            key="type",
        )
    transport = _TYPE_ALIASES.get(declared) if declared is not None else None
    if transport == "stdio" or (transport is None and not urls):
        if "command" not in raw:
            raise McpConfigError(
                f"MCP server {name!r} has neither 'command' (a stdio server) nor 'url' "
                f"(an HTTP server); add one",
                server=name,
                key="command",
            )
        return "stdio", None
    if not urls:
        raise McpConfigError(
            f"MCP server {name!r} has type {declared!r} but no 'url'; add the endpoint",
            server=name,
            key="url",
        )
    key, url = next(iter(urls.items()))
    if transport is None:
        # httpUrl is streamable HTTP in Gemini CLI and Qwen Code; a bare url is ambiguous.
        transport = "streamable-http" if key == "httpUrl" else "auto"
    elif transport == "streamable-http" and vscode:
        transport = "auto"  # VS Code's "http" falls back to SSE
    return transport, url


def _options(name: str, raw: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {
        "trust": raw.get("trust"),
        "description": raw.get("description"),
    }
    timeout = raw.get("timeout")
    if "tool_timeout_sec" in raw:
        timeout = _number(name, "tool_timeout_sec", raw["tool_timeout_sec"], "seconds") * 1000
    if (
        isinstance(timeout, int | float)
        and not isinstance(timeout, bool)
        and 0 < timeout < MIN_CALL_TIMEOUT_MS
    ):
        log.warning(
            "mcp.timeout_ignored",
            server=name,
            timeout=timeout,
            hint="'timeout' is in milliseconds; values under 1000 are ignored, as Claude Code "
            "does (Cline writes seconds: multiply by 1000)",
        )
        timeout = None
    options["timeout"] = timeout
    start: float | None = None
    for key, scale in (
        ("startup_timeout_sec", 1.0),
        ("startup_timeout_ms", 1000.0),
        ("discoveryTimeoutMs", 1000.0),
    ):
        if key in raw:
            unit = "seconds" if scale == 1.0 else "milliseconds"
            start = _number(name, key, raw[key], unit) / scale
            break
    options["startup_timeout_s"] = start
    include = raw.get("includeTools", raw.get("enabled_tools"))
    exclude = raw.get("excludeTools", raw.get("disabled_tools"))
    approve = raw.get("alwaysAllow", raw.get("autoApprove"))
    lists = (("includeTools", include), ("excludeTools", exclude), ("alwaysAllow", approve))
    for key, value in lists:
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(item, str) for item in value)
        ):
            raise McpConfigError(
                f"MCP server {name!r}: {key!r} must be a list of tool names, got {value!r:.80}",
                server=name,
                key=key,
            )
    options["include_tools"] = tuple(include) if include is not None else None
    options["exclude_tools"] = tuple(exclude) if exclude is not None else None
    options["auto_approve"] = tuple(approve) if approve is not None else None
    return options


def _number(name: str, key: str, value: Any, unit: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e12:
        raise McpConfigError(
            f"MCP server {name!r}: {key!r} must be a positive number of {unit}, got {value!r}",
            server=name,
            key=key,
        )
    return float(value)


_WIRE_KEYS: Final[Mapping[str, str]] = {
    "env_file": "envFile",
    "include_tools": "includeTools",
    "exclude_tools": "excludeTools",
    "auto_approve": "alwaysAllow",
    "startup_timeout_s": "startup_timeout_sec",
}


def _entry_error(
    name: str, model: type[StdioServerConfig] | type[HttpServerConfig], exc: ValidationError
) -> McpConfigError:
    error = exc.errors()[0]
    location = error["loc"]
    field = str(location[0]) if location else None
    key = _WIRE_KEYS.get(field, field) if field is not None else None
    where = ".".join([key or "", *(str(part) for part in location[1:])])
    if error["type"] == "missing":
        message = f"MCP server {name!r} is missing {key!r}"
    else:
        message = (
            f"MCP server {name!r}: {where!r} is invalid ({error['msg']}), "
            f"got {error.get('input')!r:.80}"
        )
        if key == "timeout":
            message += "; 'timeout' is a positive number of milliseconds"
        if key == "url":
            message += "; it must be an http:// or https:// URL"
    kind = "stdio" if model is StdioServerConfig else "HTTP"
    return McpConfigError(f"{message} (a {kind} entry)", server=name, key=key)


def _expand(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Variables filled in, before validation (a URL may be ``${BASE:-https://h}/mcp``);
    values of the wrong type are left for validation to report."""

    def sub(key: str, value: Any) -> Any:
        if not isinstance(value, str):
            return value

        def replace(match: re.Match[str]) -> str:
            special = match.group(1)
            if special == "userHome":
                return os.path.expanduser("~")
            if special == "workspaceFolder":
                return os.getcwd()
            variable, default = match.group(2), match.group(3)
            found = os.environ.get(variable)
            if found is not None and (found or default is None):
                return found
            if default is not None:
                return default
            log.warning(
                "mcp.variable_unset",
                server=name,
                key=key,
                variable=variable,
                hint=f"${{{variable}}} is not set and stays as written; set it or write "
                f"${{{variable}:-default}}",
            )
            return match.group(0)

        if "${input:" in value:
            log.warning(
                "mcp.input_variable",
                server=name,
                key=key,
                hint="VS Code prompts for ${input:...}; toolbatch cannot, so it stays as "
                "written: put the value in the environment and use ${env:NAME}",
            )
        return _VARIABLE.sub(replace, value) if "${" in value else value

    def sub_env(value: Any) -> Any:
        whole = _WHOLE_DOLLAR_VARIABLE.fullmatch(value) if isinstance(value, str) else None
        if whole is not None and whole.group(1) in os.environ:
            return os.environ[whole.group(1)]
        return sub("env", value)

    expanded = dict(fields)
    for key, wire in (
        ("command", "command"),
        ("env_file", "envFile"),
        ("cwd", "cwd"),
        ("url", "url"),
    ):
        if key in expanded:
            expanded[key] = sub(wire, expanded[key])
    if isinstance(expanded.get("args"), list):
        expanded["args"] = [sub("args", arg) for arg in expanded["args"]]
    if isinstance(expanded.get("env"), Mapping):
        expanded["env"] = {k: sub_env(v) for k, v in expanded["env"].items()}
    if isinstance(expanded.get("headers"), Mapping):
        expanded["headers"] = {k: sub("headers", v) for k, v in expanded["headers"].items()}
    return expanded
