"""Claude Code settings files: hooks, permissions and MCP servers, merged in order.

``load_settings(sources)`` takes a path, a dict, or a list of them (``~/.claude/settings.json``,
``.claude/settings.json``, ``.claude/settings.local.json``, ...) and merges them in order, as
Claude Code merges user, project and local settings (ecosystem-2.md 1.1, code.claude.com/
docs/en/settings): hooks add up across files (a handler defined identically twice runs
once), ``permissions.allow`` / ``ask`` / ``deny`` lists concatenate, scalars such as
``permissions.defaultMode`` and ``disableAllHooks`` take the last file's value, and
``mcpServers`` entries (Qwen Code and Gemini CLI keep them in settings.json) replace each
other whole, by name. Every other top-level key (``model``, ``env``, ``statusLine``, ...)
belongs to an agent's UI or model and is ignored (listed once at info level).

Hooks are Claude Code's shape::

    {"hooks": {"PreToolUse": [{"matcher": "Bash|mcp__github__.*",
                                "hooks": [{"type": "command", "command": "...", "timeout": 60}]}]}}

``command`` without ``args`` runs as ``sh -c command`` (``"shell": "bash"`` for bash), with
``args`` as an exec list. ``timeout`` is in seconds (default 600, Claude Code's). ``if``
narrows a handler to calls matching one permission rule. ``"async": true`` hooks run but
decide nothing. ``"failClosed": true`` (toolbatch's own key) makes a PreToolUse handler's
failure deny the call instead of letting it run. A Python callable may stand in for a
handler object in a dict passed directly. ``http``, ``mcp_tool``, ``prompt`` and ``agent``
handlers are not supported: they are skipped with a warning naming them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, get_args

import structlog

from toolbatch._core import JsonTooDeep, check_json_depth
from toolbatch.errors import ConfigError
from toolbatch.hooks._claude_names import CLAUDE_CODE_ONLY_TOOLS, unreachable_matcher_names
from toolbatch.hooks._command import CommandHook
from toolbatch.hooks._tool_hooks import HOOK_EVENTS, LITERAL_MATCHER, EventHook
from toolbatch.permissions import (
    BASH_TOOL_ALIAS,
    SHELL_TOOL,
    PermissionMode,
    PermissionRule,
    Permissions,
)

__all__ = [
    "SETTINGS_HOOK_TIMEOUT_S",
    "Settings",
    "SettingsDocument",
    "SettingsSource",
    "load_settings",
]

log = structlog.get_logger("toolbatch.hooks")

SETTINGS_HOOK_TIMEOUT_S: Final = 600.0
"""A settings command hook's timeout when it sets none (Claude Code's default)."""


@dataclass(frozen=True, slots=True)
class SettingsDocument:
    """A settings dict with a name for messages (``--allowedTools``, ``~/.claude.json``).

    Attributes:
        document: the settings, in the shape of a settings file.
        name: where they came from, as messages should name it.
    """

    document: Mapping[str, Any]
    name: str


SettingsSource = Mapping[str, Any] | SettingsDocument | str | os.PathLike[str]
"""One settings document: a dict (named or not), the path of a JSON file, or the JSON
itself (a string starting with ``{``)."""

_HANDLER_KEYS: Final = frozenset(
    {
        "type",
        "command",
        "args",
        "shell",
        "timeout",
        "if",
        "async",
        "failClosed",
        "statusMessage",
        "once",
        "asyncRewake",
    }
)
_GROUP_KEYS: Final = frozenset({"matcher", "hooks"})
_READ_KEYS: Final = frozenset({"hooks", "permissions", "mcpServers", "servers", "disableAllHooks"})
_PERMISSION_KEYS: Final = frozenset(
    {
        "allow",
        "ask",
        "deny",
        "defaultMode",
        "additionalDirectories",
        "disableBypassPermissionsMode",
        "disableAutoMode",
    }
)


@dataclass(frozen=True, slots=True)
class Settings:
    """Settings documents, merged.

    Attributes:
        hooks: every hook, in order (files in order, events in file order).
        permissions: the merged rules and mode.
        mcp_servers: ``mcpServers`` entries by name (later files win whole entries).
        sources: where each document came from, in order.
    """

    hooks: tuple[EventHook, ...] = ()
    permissions: Permissions = field(default_factory=Permissions)
    mcp_servers: Mapping[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    @property
    def mcp_document(self) -> dict[str, Any] | None:
        """The merged ``{"mcpServers": {...}}``, or ``None`` when no file had servers."""
        return {"mcpServers": dict(self.mcp_servers)} if self.mcp_servers else None


def load_settings(
    sources: SettingsSource | Sequence[SettingsSource] | Settings | None,
) -> Settings:
    """Read and merge settings documents (later ones win where values conflict); a
    ``Settings`` already read is returned as it is.

    Raises:
        ConfigError: a file cannot be read or is not a JSON object, or a value is of the
            wrong kind (a hook without ``command``, a rule that is not a rule); the message
            names the file, the place and the fix. Unknown keys only warn.
    """
    if sources is None:
        return Settings()
    if isinstance(sources, Settings):
        return sources  # already read (the command line reads each source once)
    if isinstance(sources, Mapping | SettingsDocument | str | os.PathLike):
        listed: list[SettingsSource] = [sources]
    elif isinstance(sources, Sequence) and not isinstance(sources, bytes):
        listed = list(sources)
    else:
        raise ConfigError(
            f"settings must be a path, a dict, or a list of them, got {type(sources).__name__}"
        )
    hooks: list[EventHook] = []
    rules: dict[str, list[PermissionRule]] = {"deny": [], "ask": [], "allow": []}
    mode: PermissionMode = "default"
    servers: dict[str, Any] = {}
    names: list[str] = []
    disable_hooks = False
    for index, source in enumerate(listed):
        document, name, base = _read(source, index)
        names.append(name)
        ignored = sorted(str(key) for key in document if key not in _READ_KEYS)
        if ignored:
            log.info("settings.keys_ignored", source=name, keys=ignored)
        if "disableAllHooks" in document:
            disable_hooks = document["disableAllHooks"] is True
        hooks.extend(_hooks(document.get("hooks"), name, base))
        mode = _permissions(document.get("permissions"), name, rules, mode)
        entries = document.get("mcpServers", document.get("servers"))
        if entries is not None:
            if not isinstance(entries, Mapping):
                raise ConfigError(
                    f"'mcpServers' in {name} must be an object of server name to entry, got "
                    f"{entries!r:.80}"
                )
            servers.update(entries)
    if disable_hooks:
        log.info("settings.hooks_disabled", hooks=len(hooks))
        hooks = []
    return Settings(
        hooks=tuple(hooks),
        permissions=Permissions(
            deny=tuple(rules["deny"]),
            ask=tuple(rules["ask"]),
            allow=tuple(rules["allow"]),
            mode=mode,
        ),
        mcp_servers=servers,
        sources=tuple(names),
    )


def _read(source: SettingsSource, index: int) -> tuple[Mapping[str, Any], str, str | None]:
    """The document, a name for messages, and the directory of its file (if any)."""
    if isinstance(source, Mapping):
        return source, f"settings[{index}] (a dict)", None
    if isinstance(source, SettingsDocument):
        if not isinstance(source.document, Mapping):
            raise ConfigError(
                f"the settings {source.name} must be an object, got {source.document!r:.80}"
            )
        return source.document, source.name, None
    if not isinstance(source, str | os.PathLike):
        raise ConfigError(
            f"settings[{index}] must be a path or a dict, got {type(source).__name__}"
        )
    text_source = os.fspath(source)
    if isinstance(text_source, str) and text_source.lstrip().startswith("{"):
        # Claude Code's --settings also takes the JSON itself.
        try:
            check_json_depth(text_source)
            document = json.loads(text_source)
        except JsonTooDeep as exc:
            raise ConfigError(f"settings[{index}] (inline JSON) is refused: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"settings[{index}] looks like inline JSON but is not valid: {exc.msg} at "
                f"column {exc.colno}"
            ) from None
        name = f"settings[{index}] (inline JSON)"
        base = None
    else:
        path = Path(text_source).expanduser()
        name = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read the settings file {name!r}: {exc.strerror or exc}; pass an "
                f"existing JSON file such as .claude/settings.json"
            ) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"the settings file {name!r} is not UTF-8 text (byte {exc.object[exc.start]:#04x} "
                f"at offset {exc.start:,}); save it as UTF-8 JSON"
            ) from None
        try:
            check_json_depth(text)
            document = json.loads(text)
        except JsonTooDeep as exc:
            raise ConfigError(f"the settings file {name!r} is refused: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"the settings file {name!r} is not valid JSON: {exc.msg} at line "
                f"{exc.lineno} column {exc.colno}"
            ) from None
        base = str(path.parent)
    if not isinstance(document, Mapping):
        raise ConfigError(
            f"the settings in {name} must be a JSON object such as "
            f'{{"hooks": {{...}}, "permissions": {{...}}}}, got {type(document).__name__}'
        )
    return document, name, base


def _hooks(block: Any, name: str, base: str | None) -> list[EventHook]:
    if block is None:
        return []
    if not isinstance(block, Mapping):
        raise ConfigError(
            f"'hooks' in {name} must be an object of event name to matcher groups, got "
            f"{block!r:.80}"
        )
    found: list[EventHook] = []
    for event, groups in block.items():
        if event not in HOOK_EVENTS:
            log.warning(
                "settings.hook_event_ignored",
                source=name,
                hook_event=event,
                hint=f"toolbatch fires {', '.join(HOOK_EVENTS)}",
            )
            continue
        if not isinstance(groups, Sequence) or isinstance(groups, str):
            raise ConfigError(
                f"hooks.{event} in {name} must be a list of "
                f'{{"matcher": ..., "hooks": [...]}} groups, got {groups!r:.80}'
            )
        for number, group in enumerate(groups):
            found.extend(_group(event, group, f"{name}: hooks.{event}[{number}]", base))
    return found


def _group(event: str, group: Any, where: str, base: str | None) -> list[EventHook]:
    if not isinstance(group, Mapping):
        raise ConfigError(
            f"{where} must be an object with 'matcher' and 'hooks', got {group!r:.80}"
        )
    extra = sorted(str(key) for key in group if key not in _GROUP_KEYS)
    if extra:
        log.warning("settings.key_ignored", where=where, keys=extra)
    matcher = group.get("matcher")
    if matcher is not None and not isinstance(matcher, str):
        raise ConfigError(f"{where}: 'matcher' must be a string, got {matcher!r:.80}")
    if event == "PostToolBatch" and matcher not in (None, "", "*"):
        log.info("settings.matcher_ignored", where=where, hint="PostToolBatch has no matcher")
        matcher = None
    elif matcher is not None:
        _warn_unreachable(matcher, where)
    handlers = group.get("hooks")
    if not isinstance(handlers, Sequence) or isinstance(handlers, str):
        raise ConfigError(f"{where}: 'hooks' must be a list of handlers, got {handlers!r:.80}")
    built: list[EventHook] = []
    for number, handler in enumerate(handlers):
        hook = _handler(event, matcher, handler, f"{where}.hooks[{number}]", base)
        if hook is not None:
            built.append(hook)
    return built


def _warn_unreachable(matcher: str, where: str) -> None:
    """Warn about a matcher naming tools toolbatch never runs (its hooks would never run)."""
    if LITERAL_MATCHER.match(matcher):
        names = [name.strip() for name in re.split(r"[|,]", matcher) if name.strip()]
        dead = unreachable_matcher_names(names)
        if not dead:
            return
        never = len(dead) == len(names)
    else:
        try:
            pattern = re.compile(matcher)
        except re.error:
            return  # EventHook reports it, naming the fix
        if pattern.search(BASH_TOOL_ALIAS) or pattern.search(SHELL_TOOL) or "mcp" in matcher:
            return
        dead = sorted(name for name in CLAUDE_CODE_ONLY_TOOLS if pattern.search(name))
        if not dead:
            return
        never = True
    log.warning(
        "settings.matcher_unreachable",
        where=where,
        matcher=matcher,
        names=dead,
        hint=(
            "toolbatch runs Bash (its shell), mcp__<server>__<tool> and your Python tools; "
            + ("this hook never runs" if never else "these names never match")
            + " (a bare mcp__<server> matches no tool: write mcp__<server>__.*)"
        ),
    )


def _handler(
    event: str, matcher: str | None, handler: Any, where: str, base: str | None
) -> EventHook | None:
    if callable(handler) and not isinstance(handler, Mapping):
        return EventHook(event, handler, matcher=matcher, source=where)  # type: ignore[arg-type]
    if not isinstance(handler, Mapping):
        raise ConfigError(
            f'{where} must be a handler like {{"type": "command", "command": "..."}} or a '
            f"Python callable, got {handler!r:.80}"
        )
    kind = handler.get("type", "command")
    if kind != "command":
        log.warning(
            "settings.hook_type_unsupported",
            where=where,
            type=kind,
            hint="toolbatch runs command hooks (and Python hooks); this handler is skipped",
        )
        return None
    extra = sorted(str(key) for key in handler if key not in _HANDLER_KEYS)
    if extra:
        log.warning("settings.key_ignored", where=where, keys=extra)
    command = handler.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ConfigError(f"{where}: a command hook needs 'command', a non-empty string")
    timeout = handler.get("timeout", SETTINGS_HOOK_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(
            f"{where}: 'timeout' is a positive number of seconds, got {timeout!r:.80}"
        )
    args = handler.get("args")
    shell = handler.get("shell", "sh")
    if shell not in ("sh", "bash"):
        raise ConfigError(
            f"{where}: 'shell' {shell!r} is not supported here; use 'bash' or leave it out"
        )
    cwd = os.getcwd()
    env = {"CLAUDE_PROJECT_DIR": cwd}  # the project directory, as Claude Code sets it
    if args is None:
        command_hook = CommandHook.shell(command, shell=shell, timeout=float(timeout), env=env)
    else:
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise ConfigError(f"{where}: 'args' must be a list of strings, got {args!r:.80}")
        # Exec form: no shell; ${CLAUDE_PROJECT_DIR} is still filled in, as Claude Code does.
        argv = [_project_dir(part, cwd) for part in (command, *args)]
        command_hook = CommandHook(argv, timeout=float(timeout), env=env)
    condition = handler.get("if")
    if condition is not None and not isinstance(condition, str):
        raise ConfigError(f"{where}: 'if' must be one permission rule, got {condition!r:.80}")
    fail_closed = handler.get("failClosed", False)
    if not isinstance(fail_closed, bool):
        raise ConfigError(f"{where}: 'failClosed' must be true or false, got {fail_closed!r}")
    return EventHook(
        event,  # type: ignore[arg-type]
        command_hook,
        matcher=matcher,
        condition=condition if event != "PostToolBatch" else None,
        fail_closed=fail_closed and event == "PreToolUse",
        ignore_decisions=handler.get("async") is True or handler.get("asyncRewake") is True,
        source=where,
    )


def _project_dir(text: str, cwd: str) -> str:
    return text.replace("${CLAUDE_PROJECT_DIR}", cwd).replace("$CLAUDE_PROJECT_DIR", cwd)


def _permissions(
    block: Any, name: str, rules: dict[str, list[PermissionRule]], mode: PermissionMode
) -> PermissionMode:
    if block is None:
        return mode
    if not isinstance(block, Mapping):
        raise ConfigError(
            f"'permissions' in {name} must be an object with allow, ask and deny lists, got "
            f"{block!r:.80}"
        )
    extra = sorted(str(key) for key in block if key not in _PERMISSION_KEYS)
    if extra:
        log.warning("settings.key_ignored", where=f"{name}: permissions", keys=extra)
    for behavior in ("deny", "ask", "allow"):
        listed = block.get(behavior, [])
        if not isinstance(listed, list):
            raise ConfigError(
                f"permissions.{behavior} in {name} must be a list of rules, got {listed!r:.80}"
            )
        for text in listed:
            rules[behavior].append(PermissionRule.parse(text, behavior, source=name))
    if "defaultMode" in block:
        value = block["defaultMode"]
        if value not in get_args(PermissionMode):
            raise ConfigError(
                f"permissions.defaultMode in {name} must be one of "
                f"{', '.join(get_args(PermissionMode))}, got {value!r}"
            )
        if value in ("plan", "auto"):
            log.info(
                "settings.mode_asks_as_default",
                mode=value,
                hint="toolbatch has no edit tools of its own and no classifier",
            )
        mode = value
    return mode
