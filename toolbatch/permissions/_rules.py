"""Claude Code's permission rules: ``allow``, ``ask`` and ``deny`` lists, evaluated per call.

Semantics (shared/reference/ecosystem-2.md section 2, from code.claude.com/docs/en/
permissions and settings):

* **Order deny, then ask, then allow; the first match wins**, whatever the specificity. A
  deny holds in every mode.
* ``Bash`` and ``Bash(*)``: every command. ``Bash(npm run build)``: exactly that command.
  ``*`` matches any run of characters, spaces included; a trailing `` *`` (or the legacy
  ``:*``) requires a word boundary (``Bash(ls *)`` matches ``ls -la`` and ``ls``, not
  ``lsof``). ``run_shell_command(...)`` is the same rule under toolbatch's own name: ``Bash``
  *is* ``run_shell_command`` here.
* A compound command (``&& || ; | |& &``, newlines, ``$()``) is matched per subcommand, after
  wrappers are stripped (see ``_bash``): a deny or ask rule matches when it matches any
  subcommand; allow rules must cover every subcommand (each may be covered by another rule).
* ``mcp__srv`` is every tool of server ``srv`` (as ``mcp__srv__*``); ``mcp__srv__tool`` one
  tool; ``mcp__srv__get_*`` a glob. Tool-name globs in deny and ask match the full name
  (``*``, ``mcp__*``); allow rules accept a glob only after a literal ``mcp__<server>__``
  (an unanchored allow glob is skipped with a warning).
* ``Tool(param:value)`` (deny and ask only) matches a top-level scalar argument, ``*`` as a
  wildcard; the primary field (``command`` of Bash) cannot be matched that way (warned and
  ignored, as in Claude Code).
* ``Read(...)``, ``Edit(...)``, ``Write(...)`` and ``WebFetch(domain:...)`` bind Claude Code's
  own file and web tools; toolbatch has none, so such rules match nothing (logged once).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

import structlog

from toolbatch.errors import ConfigError
from toolbatch.permissions._bash import split_command

__all__ = [
    "BASH_TOOL_ALIAS",
    "NO_RULE",
    "SHELL_TOOL",
    "PermissionBehavior",
    "PermissionDecision",
    "PermissionMode",
    "PermissionRule",
    "Permissions",
    "claude_tool_names",
]

log = structlog.get_logger("toolbatch.permissions")

PermissionBehavior: TypeAlias = Literal["allow", "ask", "deny"]
PermissionMode: TypeAlias = Literal[
    "default", "manual", "acceptEdits", "plan", "auto", "dontAsk", "bypassPermissions"
]
SHELL_TOOL: Final = "run_shell_command"
BASH_TOOL_ALIAS: Final = "Bash"
"""Claude Code's name of the shell tool; matchers and rules written for it apply to
``run_shell_command``."""
_PATH_TOOLS: Final = frozenset({"Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "WebFetch"})
_PRIMARY_FIELDS: Final[Mapping[str, str]] = {SHELL_TOOL: "command", BASH_TOOL_ALIAS: "command"}
_RULE: Final = re.compile(r"^\s*([^()\s]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_PARAMETER: Final = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*?)\s*$", re.DOTALL)


def claude_tool_names(name: str) -> tuple[str, ...]:
    """The names a tool answers to in matchers and rules: its own, and ``Bash`` for the
    shell."""
    return (name, BASH_TOOL_ALIAS) if name == SHELL_TOOL else (name,)


def _glob(pattern: str) -> re.Pattern[str]:
    """``*`` is any run of characters; everything else is literal; anchored both ends."""
    if pattern.endswith(":*"):
        pattern = pattern[:-2] + " *"
    if pattern.endswith(" *") and pattern.strip() != "*":
        # A trailing " *" needs a word boundary: the prefix, then a space or the end.
        head = pattern[:-2]
        body = ".*".join(re.escape(part) for part in head.split("*"))
        return re.compile(f"{body}(?: .*)?", re.DOTALL)
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """One rule as written, with where it came from.

    Attributes:
        text: the rule as written (``Bash(git push:*)``).
        behavior: which list it is in.
        source: the settings file (or ``"<dict>"``) it was read from, for messages.
    """

    text: str
    behavior: PermissionBehavior
    source: str = "<settings>"
    tool: str = field(default="", compare=False)
    specifier: str | None = field(default=None, compare=False)
    usable: bool = field(default=True, compare=False)
    tool_pattern: re.Pattern[str] = field(default=re.compile(""), compare=False, repr=False)
    command_pattern: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, text: str, behavior: PermissionBehavior, *, source: str) -> PermissionRule:
        """Read a rule; one that cannot apply is kept but marked unusable, with a warning.

        Raises:
            ConfigError: ``text`` is not a rule (empty, unbalanced parentheses).
        """
        match = _RULE.match(text) if isinstance(text, str) else None
        if match is None:
            raise ConfigError(
                f"permissions.{behavior} in {source}: {text!r} is not a permission rule; "
                f'write a tool name, optionally with a specifier: "Bash(git status:*)", '
                f'"mcp__github", "mcp__github__create_issue"'
            )
        tool, specifier = match.group(1), match.group(2)
        if tool == SHELL_TOOL:
            tool = BASH_TOOL_ALIAS
        usable = True
        why = None
        if behavior == "allow" and "*" in tool and not re.match(r"^mcp__[^*_][^*]*?__", tool):
            usable, why = False, "an allow rule may glob only after a literal mcp__<server>__"
        elif specifier is not None and tool in _PATH_TOOLS:
            usable, why = False, f"toolbatch has no {tool} tool; the rule matches nothing"
        elif specifier is not None and tool != BASH_TOOL_ALIAS:
            parameter = _PARAMETER.match(specifier)
            if specifier.strip() == "*":
                specifier = None
            elif parameter is None:
                usable, why = False, f"only parameter specifiers (param:value) apply to {tool}"
            elif behavior == "allow":
                usable, why = False, "parameter specifiers (param:value) apply to deny and ask only"
        elif specifier is not None and _PARAMETER.match(specifier) and ":" in specifier:
            name = specifier.split(":", 1)[0].strip()
            if name == "command":
                usable, why = False, "the command of Bash cannot be matched as a parameter"
            elif behavior == "allow" and not specifier.rstrip().endswith(":*"):
                usable, why = False, "parameter specifiers apply to deny and ask only"
        if why is not None:
            log.warning("permissions.rule_ignored", rule=text, source=source, reason=why)
        if tool.startswith("mcp__") and "__" not in tool[5:] and "*" not in tool:
            tool_pattern = re.compile(re.escape(tool) + r"__.*", re.DOTALL)  # the whole server
        else:
            tool_pattern = _glob(tool)
        command_pattern = None
        if specifier is not None and specifier.strip() != "*":
            command_pattern = _glob(specifier.strip())
        return cls(
            text,
            behavior,
            source,
            tool=tool,
            specifier=specifier,
            usable=usable,
            tool_pattern=tool_pattern,
            command_pattern=command_pattern,
        )

    def describe(self) -> str:
        """``'Bash(git push:*)' (ask, in ~/.claude/settings.json)``."""
        return f"{self.text!r} ({self.behavior}, in {self.source})"

    def matches_tool(self, names: Iterable[str]) -> bool:
        """Whether the rule names this tool (ignoring any specifier)."""
        return self.usable and any(self.tool_pattern.fullmatch(name) for name in names)

    def matches_call(self, names: tuple[str, ...], args: Mapping[str, Any]) -> bool:
        """Whether a deny or ask rule matches the call (any subcommand, for Bash)."""
        if not self.matches_tool(names):
            return False
        if self.specifier is None:
            return True
        if self.tool == BASH_TOOL_ALIAS and BASH_TOOL_ALIAS in names:
            parameter = _PARAMETER.match(self.specifier)
            # Bash(run_in_background:true) is a parameter rule; Bash(ls:*) a legacy prefix.
            if (
                parameter is not None
                and parameter.group(1) in args
                and not self.specifier.rstrip().endswith(":*")
            ):
                return _parameter_matches(parameter, args)
            pattern = self.command_pattern
            command = args.get("command")
            if pattern is None:
                return True
            if not isinstance(command, str):
                return False
            return any(pattern.fullmatch(sub.text) for sub in split_command(command))
        parameter = _PARAMETER.match(self.specifier)
        return parameter is not None and _parameter_matches(parameter, args)

    def covers(self, text: str) -> bool:
        """Whether an allow rule for Bash covers one subcommand."""
        pattern = self.command_pattern
        return pattern is None or pattern.fullmatch(text) is not None


def _parameter_matches(parameter: re.Match[str], args: Mapping[str, Any]) -> bool:
    name, wanted = parameter.group(1), parameter.group(2)
    if name not in args:
        return False  # an omitted parameter is never matched
    value = args[name]
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int | float | str):
        text = str(value)
    else:
        return False  # only top-level scalars
    return fnmatch.fnmatchcase(text, wanted) if "*" in wanted else text == wanted


@dataclass(frozen=True, slots=True)
class PermissionDecision:
    """What the rules say about one call.

    Attributes:
        behavior: ``allow``, ``ask`` or ``deny``; ``None`` when no rule matched.
        rule: the rule that decided (for an allow of a compound command: the first rule).
    """

    behavior: PermissionBehavior | None
    rule: PermissionRule | None = None


NO_RULE: Final = PermissionDecision(None)


@dataclass(frozen=True, slots=True)
class Permissions:
    """The merged ``permissions`` block: rules in order, and the mode.

    Attributes:
        deny / ask / allow: the rules of each list, in settings order.
        mode: ``defaultMode``: ``bypassPermissions`` answers every ask with allow (denies
            still hold), ``dontAsk`` answers it with deny; the others ask as usual
            (``acceptEdits``, ``plan`` and ``auto`` concern Claude Code's own edit tools
            and classifier, which toolbatch does not have).
    """

    deny: tuple[PermissionRule, ...] = ()
    ask: tuple[PermissionRule, ...] = ()
    allow: tuple[PermissionRule, ...] = ()
    mode: PermissionMode = "default"

    @property
    def empty(self) -> bool:
        """No rule and the default mode: every call goes the usual way."""
        return not (self.deny or self.ask or self.allow) and self.mode in ("default", "manual")

    def decide(self, tool: str, args: Mapping[str, Any]) -> PermissionDecision:
        """The first matching rule, deny before ask before allow."""
        names = claude_tool_names(tool)
        for rule in self.deny:
            if rule.matches_call(names, args):
                return PermissionDecision("deny", rule)
        for rule in self.ask:
            if rule.matches_call(names, args):
                return PermissionDecision("ask", rule)
        allowed = self._allowed(names, args)
        return PermissionDecision("allow", allowed) if allowed is not None else NO_RULE

    def hidden(self, tool: str) -> PermissionRule | None:
        """A bare-name deny rule removes the tool from the model's view (``Bash``,
        ``Bash(*)``, ``mcp__*``); a scoped deny leaves it visible."""
        names = claude_tool_names(tool)
        for rule in self.deny:
            if rule.specifier is None and rule.matches_tool(names):
                return rule
        return None

    def _allowed(self, names: tuple[str, ...], args: Mapping[str, Any]) -> PermissionRule | None:
        rules = [rule for rule in self.allow if rule.matches_tool(names)]
        if not rules:
            return None
        for rule in rules:
            if rule.specifier is None:
                return rule
        if BASH_TOOL_ALIAS not in names:
            return None
        command = args.get("command")
        if not isinstance(command, str):
            return None
        subcommands = split_command(command)
        if not subcommands:
            return None
        first: PermissionRule | None = None
        for sub in subcommands:
            if not sub.safe_for_allow:
                return None  # an allow rule does not look past an unknown assignment
            covering = next((rule for rule in rules if rule.covers(sub.text)), None)
            if covering is None:
                return None
            first = first or covering
        return first
