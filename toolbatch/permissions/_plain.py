"""What an allow rule may approve: a plain sequence of simple commands of literal words.

Pure logic, no I/O. Simple commands joined by ``&&``, ``||``, ``;``, ``|`` or newlines, with
redirections to literal paths, each with Claude Code's wrappers stripped; anything else is
not plain, and the reason says what.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import tree_sitter

from toolbatch.permissions._candidates import _WRAPPERS
from toolbatch.permissions._syntax import _command_parts, _quote, _word

__all__ = [
    "SAFE_ENV_ASSIGNMENTS",
    "SimpleCommand",
]

SAFE_ENV_ASSIGNMENTS: Final = frozenset(
    {
        "CI",
        "DEBUG",
        "FORCE_COLOR",
        "LANG",
        "LC_ALL",
        "NODE_ENV",
        "NO_COLOR",
        "PYTHONUNBUFFERED",
        "RUST_BACKTRACE",
        "RUST_LOG",
        "TERM",
        "TZ",
    }
)
"""Leading assignments an allow rule looks past (Claude Code strips "certain known-safe"
variables without listing them; this list is toolbatch's, chosen to change no program's
behaviour beyond its output)."""

_CC_WRAPPERS: Final = frozenset(
    {"timeout", "time", "nice", "nohup", "stdbuf", "command", "builtin", "noglob"}
)
"""The wrappers Claude Code strips before an allow rule is matched (and flagless xargs)."""


_DESCRIBED: Final[dict[str, str]] = {
    "command_substitution": "a command substitution $(...)",
    "process_substitution": "a process substitution <(...) or >(...)",
    "subshell": "a subshell (...)",
    "compound_statement": "a group { ...; }",
    "if_statement": "control flow (if)",
    "for_statement": "control flow (for)",
    "c_style_for_statement": "control flow (for)",
    "while_statement": "control flow (while/until)",
    "case_statement": "control flow (case)",
    "function_definition": "a function definition",
    "negated_command": "a negation (!)",
    "simple_expansion": "a variable expansion",
    "expansion": "a parameter expansion ${...}",
    "arithmetic_expansion": "an arithmetic expansion $((...))",
    "translated_string": 'a translated string $"..."',
    "comment": "a comment",
    "variable_assignment": "a variable assignment",
    "variable_assignments": "a variable assignment",
    "declaration_command": "a declaration (export, local, declare, ...)",
    "unset_command": "unset",
    "test_command": "a test [[ ... ]]",
    "compound_assignment": "an array",
}
_SEPARATORS: Final = frozenset({"&&", "||", ";", "|", "|&", "\n"})


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command of a plain sequence, as an allow rule sees it.

    Attributes:
        words: the command's words, decoded, after Claude Code's wrappers.
        assignments: the names of the leading ``VAR=value`` assignments.
        redirects: the literal targets of its file redirections (``> out``: ``out``).
    """

    words: tuple[str, ...]
    assignments: tuple[str, ...] = ()
    redirects: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The words as an allow rule matches them: joined by spaces, a word that would not
        read back as itself single-quoted."""
        return " ".join(_quote(word) for word in self.words)

    @property
    def safe_for_allow(self) -> bool:
        """Whether every leading assignment is a known-safe one."""
        return all(name in SAFE_ENV_ASSIGNMENTS for name in self.assignments)


def _plain_sequence(root: tree_sitter.Node) -> tuple[list[SimpleCommand] | None, str | None]:
    commands: list[SimpleCommand] = []
    # Each node with the redirect targets of the statements around it (tree-sitter hangs
    # "a && b > out" 's redirect on the list: every command of it gets the target).
    stack: list[tuple[tree_sitter.Node, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, outer = stack.pop()
        kind = node.type
        if kind in ("program", "list", "pipeline"):
            named = []
            for child in node.children:
                if child.is_named:
                    named.append((child, outer))
                elif child.type not in _SEPARATORS:
                    return None, _describe_token(child.type)
            stack.extend(reversed(named))  # source order
            continue
        if kind == "redirected_statement":
            body = node.child_by_field_name("body")
            if body is None or body.type not in ("command", "list", "pipeline"):
                inner = body.type if body is not None else "redirection"
                return None, _DESCRIBED.get(inner, f"a {inner.replace('_', ' ')}")
            targets = list(outer)
            for index, child in enumerate(node.children):
                if node.field_name_for_child(index) == "redirect":
                    target, why = _redirect_target(child)
                    if why is not None:
                        return None, why
                    if target is not None:
                        targets.append(target)
            stack.append((body, tuple(targets)))
            continue
        if kind == "command":
            simple, why = _simple(node, outer)
            if simple is None:
                return None, why
            commands.append(simple)
            continue
        return None, _DESCRIBED.get(kind, f"a {kind.replace('_', ' ')}")
    return commands, None


def _describe_token(token: str) -> str:
    if token == "&":
        return "a background job (&)"
    return f"the operator {token!r}"


def _redirect_target(node: tree_sitter.Node) -> tuple[str | None, str | None]:
    """A redirect's literal target, or why it is not one."""
    if node.type == "file_redirect":
        destination = node.child_by_field_name("destination")
        if destination is None:
            return None, "a redirection without a target"
        target = _word(destination)
        if not target.fixed:
            return None, f"a redirection to {target.text!r}, computed when it runs"
        operator = next((c.type for c in node.children if not c.is_named), "")
        if operator in (">&", "<&", ">&-", "<&-") and destination.type == "number":
            return None, None  # 2>&1: a descriptor, not a file
        return target.text, None
    if node.type == "herestring_redirect":
        words = [_word(c) for c in node.named_children]
        if all(word.literal for word in words):
            return None, None
        return None, "a here-string with expansions"
    if node.type == "heredoc_redirect":
        for child in node.children:
            if child.type == "heredoc_body":
                if any(grandchild.type != "heredoc_content" for grandchild in child.named_children):
                    return None, "a here-document with expansions"
            elif child.is_named and child.type not in ("heredoc_start", "heredoc_end"):
                return None, "a here-document followed by more commands"
        return None, None
    return None, f"a {node.type.replace('_', ' ')}"


def _simple(
    node: tree_sitter.Node, redirects: tuple[str, ...]
) -> tuple[SimpleCommand | None, str | None]:
    assignments, words, inner_redirects = _command_parts(node)
    names = []
    for name, value in assignments:
        if value is not None and not value.literal:
            return None, f"the assignment {name}={value.text} expands text when it runs"
        names.append(name)
    for child in node.children:
        if child.type == "comment":
            return None, "a comment"
    if not words:
        return None, "a variable assignment"
    for word in words:
        if not word.literal:
            return None, _expansion_reason(word.text)
    if not words[0].fixed:
        return None, f"the command name {words[0].text!r} expands when it runs"
    targets = list(redirects)
    for redirect in inner_redirects:
        target, why = _redirect_target(redirect)
        if why is not None:
            return None, why
        if target is not None:
            targets.append(target)
    texts = _strip_cc_wrappers([word.text for word in words])
    if texts is None:
        return None, "a wrapper whose command cannot be told"
    if not texts:
        return None, "a wrapper without a command"
    if texts[0] == "eval":
        return None, "eval (it runs its arguments as a command)"
    return SimpleCommand(tuple(texts), tuple(names), tuple(targets)), None


def _expansion_reason(source: str) -> str:
    if "$(" in source or "`" in source:
        return _DESCRIBED["command_substitution"]
    if "<(" in source or ">(" in source:
        return _DESCRIBED["process_substitution"]
    if "$((" in source:
        return _DESCRIBED["arithmetic_expansion"]
    return f"the expansion {source[:40]!r}"


def _strip_cc_wrappers(words: list[str]) -> list[str] | None:
    """Claude Code's wrapper stripping for allow rules: ``timeout 30 npm test`` is
    ``npm test``; only flagless ``xargs``; ``command -v`` is a lookup, kept."""
    index = 0
    while index < len(words):
        word = words[index]
        if word == "xargs":
            if index + 1 < len(words) and not words[index + 1].startswith("-"):
                index += 1
                continue
            break
        if word not in _CC_WRAPPERS:
            break
        if word == "command" and words[index + 1 : index + 2] in (["-v"], ["-V"]):
            break
        options = _WRAPPERS[word]
        index += 1
        operands = options.operands
        while index < len(words):
            text = words[index]
            if text == "--":
                index += 1
                break
            if text.startswith("-") and len(text) > 1:
                index += 1
                takes_value = (text.startswith("--") and text in options.long_values) or (
                    not text.startswith("--") and text[-1] in options.short_values
                )
                if takes_value:
                    index += 1
                continue
            if operands:
                operands -= 1
                index += 1
                continue
            break
    if index > len(words):
        return None
    return words[index:]
