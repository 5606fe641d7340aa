"""Claude Code's configuration flags: where settings and MCP servers come from.

The flags mean what Claude Code's CLI reference says they mean (code.claude.com/docs/en/
cli-reference), with one deliberate difference: **nothing is read from the project or the
home directory unless asked**. Claude Code loads every settings level by default; a batch
runner must not run a repository's hooks, or start its MCP servers, because it was started
inside it. ``--setting-sources`` asks.

``--settings VALUE`` (repeatable)
    A settings file, a ``/dev/fd/N`` path (``<(...)``) or the JSON itself. Applied above the
    files of ``--setting-sources`` (Claude Code's "command line" level), in order.
``--setting-sources user,project,local``
    Loads ``~/.claude/settings.json``, ``.claude/settings.json`` and
    ``.claude/settings.local.json`` (the current directory is the project), lowest first;
    a missing file is skipped. ``project`` also loads the project's ``.mcp.json``; ``user``
    and ``local`` the servers Claude Code keeps in ``~/.claude.json`` (top level, and under
    ``projects[<this directory>]``). Precedence, as Claude Code's: local > project > user.
``--mcp-config VALUE`` (repeatable)
    A file (JSON, or Codex's ``config.toml``), a ``/dev/fd/N`` path, or the JSON itself;
    later ones win whole entries, over every other source of servers.
``--strict-mcp-config``
    Only the servers of ``--mcp-config``: no ``.mcp.json``, no ``~/.claude.json``, no
    ``mcpServers`` of a settings file.
``--allowedTools RULES`` / ``--disallowedTools RULES`` (also ``--allowed-tools``, ...)
    Permission rules added to ``allow`` / ``deny`` (a deny in any file still beats an
    allow here; a bare-name deny removes the tool). One flag takes one rule or a list
    separated by commas or spaces outside parentheses (``"Bash(git log:*) Bash(git diff:*)"``);
    repeat the flag for more.

Every value is read once, here, so a ``/dev/fd`` pipe is not read twice.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import structlog

from toolbatch.errors import ConfigError
from toolbatch.hooks import Settings, SettingsDocument, SettingsSource, load_settings

__all__ = ["SETTING_SOURCES", "ConfigSources", "add_config_options", "read_config_sources"]

log = structlog.get_logger("toolbatch.cli")

SETTING_SOURCES: Final = ("user", "project", "local")
"""Claude Code's setting levels, lowest first."""


def _setting_sources(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in SETTING_SOURCES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown setting source(s) {', '.join(map(repr, unknown))}; use a "
            f"comma-separated list of {', '.join(SETTING_SOURCES)} (e.g. user,project,local)"
        )
    return names


def add_config_options(options: argparse.ArgumentParser) -> None:
    """Declare the configuration flags (see the module docstring) on ``options``."""
    options.add_argument(
        "--mcp-config",
        action="append",
        metavar="CONFIG",
        help='MCP servers: a JSON file ({"mcpServers": ...}), Codex\'s config.toml, a '
        "/dev/fd path or the JSON itself; repeatable, later wins",
    )
    options.add_argument(
        "--strict-mcp-config",
        action="store_true",
        help="use only the servers of --mcp-config (no .mcp.json, ~/.claude.json or "
        "mcpServers of a settings file)",
    )
    options.add_argument(
        "--settings",
        action="append",
        metavar="SETTINGS",
        help="Claude Code settings (hooks, permissions, mcpServers): a file, a /dev/fd path "
        "or the JSON itself; repeatable, merged in order above --setting-sources",
    )
    options.add_argument(
        "--setting-sources",
        type=_setting_sources,
        default=(),
        metavar="SOURCES",
        help="load Claude Code's settings files: a comma-separated list of user "
        "(~/.claude/settings.json), project (.claude/settings.json and .mcp.json) and local "
        "(.claude/settings.local.json); default: none (a project's hooks never run unasked)",
    )
    for flag, alias, dest, what in (
        ("--allowedTools", "--allowed-tools", "allowed_tools", "allow"),
        ("--disallowedTools", "--disallowed-tools", "disallowed_tools", "deny"),
    ):
        options.add_argument(
            flag,
            alias,
            dest=dest,
            action="append",
            metavar="RULES",
            help=f'permission rules added to {what} ("Bash(git log:*)", "mcp__github"); '
            f"a list separated by commas or spaces outside parentheses; repeatable",
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigSources:
    """What the flags configure, read once.

    Attributes:
        settings: the merged settings (hooks and permissions; their servers are in ``mcp``).
        mcp: the MCP servers of every source, merged (``None``: no servers configured).
    """

    settings: Settings
    mcp: Any = None


def split_rules(text: str) -> list[str]:
    """``"Bash(git log:*) Bash(git diff:*),Read"`` as its rules: split on commas and
    whitespace outside parentheses."""
    rules: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        if depth == 0 and (char == "," or char.isspace()):
            if current:
                rules.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        rules.append("".join(current))
    return rules


def _settings_files(sources: Sequence[str], *, cwd: Path, home: Path) -> list[SettingsSource]:
    paths = {
        "user": home / ".claude" / "settings.json",
        "project": cwd / ".claude" / "settings.json",
        "local": cwd / ".claude" / "settings.local.json",
    }
    found: list[SettingsSource] = []
    for name in SETTING_SOURCES:  # lowest first, whatever order the flag listed them in
        if name not in sources:
            continue
        path = paths[name]
        if path.is_file():
            found.append(str(path))
        else:
            log.info("settings.source_missing", source=name, path=str(path))
    return found


def _claude_json_servers(
    sources: Sequence[str], *, cwd: Path, home: Path
) -> tuple[Any | None, Any | None]:
    """``~/.claude.json``'s user-scope (top level) and local-scope (this project's) servers."""
    path = home / ".claude.json"
    if ("user" not in sources and "local" not in sources) or not path.is_file():
        return None, None
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"cannot read the MCP servers of {str(path)!r}: {exc}; fix the file, or leave "
            f"user and local out of --setting-sources"
        ) from None
    if not isinstance(state, Mapping):
        return None, None
    user = local = None
    if "user" in sources and isinstance(state.get("mcpServers"), Mapping):
        user = {"mcpServers": state["mcpServers"]}
    projects = state.get("projects")
    if "local" in sources and isinstance(projects, Mapping):
        project = projects.get(str(cwd))
        if isinstance(project, Mapping) and isinstance(project.get("mcpServers"), Mapping):
            local = {"mcpServers": project["mcpServers"]}
    return user, local


def read_config_sources(
    args: argparse.Namespace, *, cwd: Path | None = None, home: Path | None = None
) -> ConfigSources:
    """Read every source the flags name, once.

    Raises:
        ConfigError: a file cannot be read, or a document or rule is invalid (the message
            names it and the fix).
    """
    cwd = Path.cwd() if cwd is None else cwd
    home = Path.home() if home is None else home
    sources: Sequence[str] = args.setting_sources or ()
    listed: list[SettingsSource] = _settings_files(sources, cwd=cwd, home=home)
    listed.extend(args.settings or ())
    for dest, behavior, flag in (
        ("allowed_tools", "allow", "--allowedTools"),
        ("disallowed_tools", "deny", "--disallowedTools"),
    ):
        rules = [rule for text in getattr(args, dest) or () for rule in split_rules(text)]
        if rules:
            listed.append(SettingsDocument({"permissions": {behavior: rules}}, flag))
    settings = load_settings(listed)
    documents: list[Any] = []
    if not args.strict_mcp_config:
        if settings.mcp_document is not None:
            documents.append(settings.mcp_document)
        user, local = _claude_json_servers(sources, cwd=cwd, home=home)
        project_file = cwd / ".mcp.json"
        project = str(project_file) if "project" in sources and project_file.is_file() else None
        documents.extend(d for d in (user, project, local) if d is not None)
    elif settings.mcp_servers:
        log.info("mcp.strict_config", ignored=sorted(settings.mcp_servers))
    documents.extend(args.mcp_config or ())
    settings = dataclasses.replace(settings, mcp_servers={})
    if not documents:
        return ConfigSources(settings)
    from toolbatch.producers.mcp import load_mcp_config, merge_mcp_configs

    return ConfigSources(
        settings, merge_mcp_configs(*(load_mcp_config(document) for document in documents))
    )
