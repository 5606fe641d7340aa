"""Shell command splitting for Bash permission rules, as Claude Code does it.

Claude Code matches a ``Bash(...)`` rule against each subcommand of a compound command, not
the whole string (shared/reference/ecosystem-2.md section 2; code.claude.com/docs/en/
permissions, "Compound commands" and "Wrappers"):

* separators ``&&``, ``||``, ``;``, ``|``, ``|&``, ``&`` and newlines split a command;
* ``$(...)`` and backquotes are commands too: their contents are split and checked;
* wrappers are stripped first: ``timeout``, ``time``, ``nice``, ``nohup``, ``stdbuf``,
  ``command``, ``builtin``, ``noglob`` (with their own options), and ``xargs`` without
  flags; ``command -v`` is a lookup, not a wrapper;
* leading ``VAR=value`` assignments: allow rules look past only known-safe ones, deny and
  ask rules past any.

Quotes (``'...'``, ``"..."``) and backslash escapes are respected while splitting. This is
a conservative lexer, not a shell: anything it cannot follow (an unterminated quote) stays
in one piece, which can only make an allow rule match less.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["SAFE_ENV_ASSIGNMENTS", "Subcommand", "split_command"]

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

_WRAPPERS: Final = frozenset(
    {"timeout", "time", "nice", "nohup", "stdbuf", "command", "builtin", "noglob"}
)
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_WRAPPER_VALUE_OPTIONS: Final = {
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
}


@dataclass(frozen=True, slots=True)
class Subcommand:
    """One simple command of a compound command, as the rules see it.

    Attributes:
        text: the command after stripping wrappers and assignments, whitespace-normalised.
        assignments: the names of the leading ``VAR=`` assignments that were stripped.
    """

    text: str
    assignments: tuple[str, ...] = ()

    @property
    def safe_for_allow(self) -> bool:
        """Whether every stripped assignment is a known-safe one."""
        return all(name in SAFE_ENV_ASSIGNMENTS for name in self.assignments)


def split_command(command: str) -> list[Subcommand]:
    """Every simple command of ``command`` (substitutions included), wrappers stripped."""
    pieces: list[str] = []
    _split(command, pieces, depth=0)
    subcommands = []
    for piece in pieces:
        words = _words(piece)
        if not words:
            continue
        subcommands.append(_strip(words))
    return [sub for sub in subcommands if sub.text]


def _split(command: str, out: list[str], *, depth: int) -> None:
    """Cut ``command`` at separators outside quotes; recurse into ``$()`` and backquotes."""
    if depth > 8:  # absurd nesting: keep it whole (an allow rule then matches less)
        out.append(command)
        return
    current: list[str] = []
    index = 0
    length = len(command)
    quote: str | None = None
    while index < length:
        char = command[index]
        if quote == "'":
            current.append(char)
            if char == "'":
                quote = None
            index += 1
            continue
        if char == "\\" and index + 1 < length:
            current.append(command[index : index + 2])
            index += 2
            continue
        if quote == '"':
            if char == '"':
                quote = None
                current.append(char)
                index += 1
                continue
            if command.startswith("$(", index) or char == "`":
                index = _substitution(command, index, current, out, depth)
                continue
            current.append(char)
            index += 1
            continue
        if char in "'\"":
            quote = char
            current.append(char)
            index += 1
            continue
        if command.startswith("$(", index) or char == "`":
            index = _substitution(command, index, current, out, depth)
            continue
        if char == "\n" or char == ";":
            out.append("".join(current))
            current = []
            index += 1
            continue
        if char in "&|":
            # && || |& & | (a redirection such as 2>&1 or &> is not a separator)
            previous = command[index - 1] if index else ""
            if char == "&" and (previous in "<>" or command.startswith("&>", index)):
                current.append(char)
                index += 1
                continue
            out.append("".join(current))
            current = []
            pair = command[index : index + 2]
            index += 2 if pair in ("&&", "||", "|&") else 1
            continue
        current.append(char)
        index += 1
    out.append("".join(current))


def _substitution(command: str, start: int, current: list[str], out: list[str], depth: int) -> int:
    """Record the substitution starting at ``start`` (kept in the outer text as well)."""
    if command[start] == "`":
        end = command.find("`", start + 1)
        if end < 0:
            current.append(command[start:])
            return len(command)
        _split(command[start + 1 : end], out, depth=depth + 1)
        current.append(command[start : end + 1])
        return end + 1
    level = 0
    index = start + 1
    quote: str | None = None
    while index < len(command):
        char = command[index]
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "(":
            level += 1
        elif char == ")":
            level -= 1
            if level == 0:
                _split(command[start + 2 : index], out, depth=depth + 1)
                current.append(command[start : index + 1])
                return index + 1
        index += 1
    current.append(command[start:])
    return len(command)


def _words(piece: str) -> list[str]:
    """Whitespace-separated words, quotes kept as written (so the text round-trips)."""
    words: list[str] = []
    word: list[str] = []
    quote: str | None = None
    index = 0
    while index < len(piece):
        char = piece[index]
        if quote is None and char in " \t\r":
            if word:
                words.append("".join(word))
                word = []
            index += 1
            continue
        if quote is None and char == "\\" and index + 1 < len(piece):
            word.append(piece[index : index + 2])
            index += 2
            continue
        if quote is None and char in "'\"":
            quote = char
        elif char == quote:
            quote = None
        word.append(char)
        index += 1
    if word:
        words.append("".join(word))
    return words


def _strip(words: list[str]) -> Subcommand:
    assignments: list[str] = []
    index = 0
    while True:
        while index < len(words) and _ASSIGNMENT.match(words[index]):
            assignments.append(words[index].split("=", 1)[0])
            index += 1
        if index >= len(words):
            break
        word = words[index]
        if word == "xargs":
            if index + 1 < len(words) and not words[index + 1].startswith("-"):
                index += 1
                continue
            break
        if word not in _WRAPPERS:
            break
        if word == "command" and index + 1 < len(words) and words[index + 1] in ("-v", "-V"):
            break  # a lookup, not a wrapper
        index = _skip_wrapper(word, words, index + 1)
    return Subcommand(" ".join(words[index:]), tuple(assignments))


def _skip_wrapper(wrapper: str, words: list[str], index: int) -> int:
    """The index of the wrapped command: past the wrapper's options and operands."""
    takes_value = _WRAPPER_VALUE_OPTIONS.get(wrapper, frozenset())
    while index < len(words) and words[index].startswith("-") and words[index] != "-":
        option = words[index]
        index += 1
        if option == "--":
            break
        if option in takes_value and index < len(words):
            index += 1
    if wrapper == "timeout" and index < len(words):
        index += 1  # the duration
    return index
