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
* ``Bash(...)`` rules are decided on the command's tree-sitter-bash parse tree (``_bash``): a
  deny or ask rule matches any simple command anywhere in it (after wrappers, by basename,
  inside ``bash -c`` strings); a command that cannot be analysed is denied when a deny rule
  for Bash is in force (asked when an ask rule is). An allow rule approves only a plain
  sequence of simple commands of literal words, each covered by an allow rule (each may be
  covered by another); anything else is left to ask.
* Modes (``defaultMode``, ``--permission-mode``), as Claude Code's: ``default`` (alias
  ``manual``) asks what no rule allows; ``acceptEdits`` also approves plain file-system
  commands (``ACCEPT_EDITS_COMMANDS``) on relative paths inside the working directory;
  ``plan`` and ``auto`` ask as ``default`` does (toolbatch has no edit tools and no
  classifier); ``dontAsk`` refuses whatever would ask; ``bypassPermissions`` asks nothing
  but explicit asks (an ask rule, a hook's ``ask``). Deny rules hold in every mode.
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
from toolbatch.permissions._bash import (
    SAFE_ENV_ASSIGNMENTS,
    CommandAnalysis,
    SimpleCommand,
    analyze_command,
)

__all__ = [
    "ACCEPT_EDITS_COMMANDS",
    "BASH_TOOL_ALIAS",
    "NO_RULE",
    "PERMISSION_MODES",
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
PERMISSION_MODES: Final = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk")
"""The modes ``--permission-mode`` takes (settings also accept ``manual``, an alias of
``default``, and ``auto``, which asks as ``default`` here)."""
ACCEPT_EDITS_COMMANDS: Final = frozenset({"mkdir", "touch", "rm", "rmdir", "mv", "cp"})
"""What ``acceptEdits`` approves without asking, on paths inside the working directory
(Claude Code's list, less ``sed``: its ``e`` and ``w`` commands run and write anything)."""
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

    def matches_call(
        self,
        names: tuple[str, ...],
        args: Mapping[str, Any],
        analysis: CommandAnalysis | None = None,
    ) -> bool:
        """Whether a deny or ask rule matches the call (any simple command, for Bash).

        A Bash command that cannot be analysed matches every command rule: whether a
        command hides in it cannot be told (deny and ask then hold, a hook's ``if`` runs).
        """
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
            if analysis is None:
                analysis = analyze_command(command)
            if not analysis.analysable:
                return True
            return any(pattern.fullmatch(text) for text in analysis.candidates)
        parameter = _PARAMETER.match(self.specifier)
        return parameter is not None and _parameter_matches(parameter, args)

    @property
    def matches_commands(self) -> bool:
        """Whether this is a Bash rule with a command pattern (``Bash(rm:*)``)."""
        return self.usable and self.tool == BASH_TOOL_ALIAS and self.command_pattern is not None

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
        behavior: ``allow``, ``ask`` or ``deny``; ``None`` when no rule decided.
        rule: the rule that decided (for an allow of a compound command: the first rule;
            ``None`` for an approval by the mode).
        reason: why, when the rule alone does not say it: the command could not be
            analysed (deny, ask), the mode approved it (allow), or why no allow rule
            covers it (``None`` behavior).
    """

    behavior: PermissionBehavior | None
    rule: PermissionRule | None = None
    reason: str | None = None


NO_RULE: Final = PermissionDecision(None)


@dataclass(frozen=True, slots=True)
class Permissions:
    """The merged ``permissions`` block: rules in order, and the mode.

    Attributes:
        deny / ask / allow: the rules of each list, in settings order.
        mode: ``defaultMode`` (or ``--permission-mode``); ``manual`` is stored as
            ``default``. See the module docstring.
    """

    deny: tuple[PermissionRule, ...] = ()
    ask: tuple[PermissionRule, ...] = ()
    allow: tuple[PermissionRule, ...] = ()
    mode: PermissionMode = "default"

    def __post_init__(self) -> None:
        if self.mode == "manual":
            object.__setattr__(self, "mode", "default")

    @property
    def restricts(self) -> bool:
        """Whether any usable rule is configured: then what no allow rule covers is asked,
        and refused when nobody can be asked."""
        return any(rule.usable for rule in (*self.deny, *self.ask, *self.allow))

    @property
    def empty(self) -> bool:
        """No usable rule, and a mode that asks as usual: every call goes the usual way."""
        return not self.restricts and self.mode in ("default", "plan", "auto")

    def with_mode(self, mode: PermissionMode) -> Permissions:
        """The same rules under another mode (``--permission-mode`` over ``defaultMode``)."""
        return Permissions(self.deny, self.ask, self.allow, mode)

    def decide(self, tool: str, args: Mapping[str, Any]) -> PermissionDecision:
        """The first matching rule, deny before ask before allow (then the mode's own
        approvals); ``reason`` says what an allow rule would have needed."""
        names = claude_tool_names(tool)
        analysis: CommandAnalysis | None = None
        command = args.get("command") if BASH_TOOL_ALIAS in names else None
        if isinstance(command, str) and (
            self.mode == "acceptEdits"
            or any(rule.matches_commands for rule in (*self.deny, *self.ask, *self.allow))
        ):
            analysis = analyze_command(command)
        for behavior, rules in (("deny", self.deny), ("ask", self.ask)):
            for rule in rules:
                if rule.matches_call(names, args, analysis):
                    reason = None
                    if rule.matches_commands and analysis is not None and not analysis.analysable:
                        reason = (
                            f"the command cannot be analysed ({'; '.join(analysis.unanalysable)}), "
                            f"so whether it runs what the rule names cannot be told"
                        )
                    return PermissionDecision(behavior, rule, reason)  # type: ignore[arg-type]
        return self._allowed(tool, names, args, analysis)

    def hidden(self, tool: str) -> PermissionRule | None:
        """A bare-name deny rule removes the tool from the model's view (``Bash``,
        ``Bash(*)``, ``mcp__*``); a scoped deny leaves it visible."""
        names = claude_tool_names(tool)
        for rule in self.deny:
            if rule.specifier is None and rule.matches_tool(names):
                return rule
        return None

    def allow_summary(self) -> str:
        """The allow rules, for a refusal: ``the allow rules are 'Bash(ls:*)' (in s.json)``."""
        usable = [rule for rule in self.allow if rule.usable]
        if not usable:
            sources = sorted({r.source for r in (*self.deny, *self.ask) if r.usable})
            return f"no allow rule is configured (rules from {', '.join(sources)})"
        by_source: dict[str, list[str]] = {}
        for rule in usable:
            by_source.setdefault(rule.source, []).append(repr(rule.text))
        listed = "; ".join(
            f"{', '.join(texts)} (in {source})" for source, texts in by_source.items()
        )
        return f"the allow rules are {listed}"

    def _allowed(
        self,
        tool: str,
        names: tuple[str, ...],
        args: Mapping[str, Any],
        analysis: CommandAnalysis | None,
    ) -> PermissionDecision:
        rules = [rule for rule in self.allow if rule.matches_tool(names)]
        for rule in rules:
            if rule.specifier is None:
                return PermissionDecision("allow", rule)
        if BASH_TOOL_ALIAS not in names:
            return PermissionDecision(None, reason=f"no allow rule names {tool!r}")
        command = args.get("command")
        if not isinstance(command, str):
            return PermissionDecision(None, reason="the call has no command")
        if analysis is None:
            analysis = analyze_command(command)
        if analysis.not_plain is not None:
            return PermissionDecision(
                None,
                reason=f"the command is not a plain sequence of simple commands of literal "
                f"words ({analysis.not_plain}), and allow rules approve nothing else",
            )
        first: PermissionRule | None = None
        uncovered = None
        for sub in analysis.plain:
            if not sub.safe_for_allow:
                unsafe = [n for n in sub.assignments if n not in SAFE_ENV_ASSIGNMENTS]
                uncovered = f"allow rules do not look past the assignment {unsafe[0]}="
                break
            covering = next((rule for rule in rules if rule.covers(sub.text)), None)
            if covering is None:
                uncovered = f"no allow rule covers {sub.text!r}"
                break
            first = first or covering
        if uncovered is None and first is not None:
            return PermissionDecision("allow", first)
        if self.mode == "acceptEdits" and all(_edits_in_place(sub) for sub in analysis.plain):
            return PermissionDecision(
                "allow",
                reason="the mode acceptEdits approves file-system commands inside the "
                "working directory",
            )
        return PermissionDecision(None, reason=uncovered)


def _edits_in_place(sub: SimpleCommand) -> bool:
    """A plain file-system command (``ACCEPT_EDITS_COMMANDS``) on relative paths that stay
    inside the working directory."""
    if not sub.words or sub.words[0] not in ACCEPT_EDITS_COMMANDS or not sub.safe_for_allow:
        return False
    paths = [word for word in sub.words[1:] if not word.startswith("-")]
    return all(_inside(path) for path in (*paths, *sub.redirects))


def _inside(path: str) -> bool:
    return (
        bool(path)
        and not path.startswith(("/", "~"))
        and ".." not in path.split("/")
        and not any(char in path for char in "*?[{")
    )
