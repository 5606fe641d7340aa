"""What a deny or ask rule could match: every simple command anywhere in a command.

Pure logic, no I/O. Every simple command of the parse tree (subshells, groups, control flow,
functions, command and process substitutions), with names decoded from any quoting, after
any wrapper (``env``, ``exec``, ``sudo``, ``xargs`` with options, ...), by basename, and
inside ``bash -c '...'``, ``eval``, ``trap``, ``alias`` and ``find -exec`` strings, parsed in
turn to ``MAX_DEPTH``; what cannot be followed is recorded as unanalysable.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import tree_sitter

from toolbatch.permissions._syntax import (
    _command_parts,
    _error_place,
    _parse,
    _walk,
    _Word,
)

__all__ = [
    "MAX_DEPTH",
]

MAX_DEPTH: Final = 4
"""How many command strings deep (``bash -c "bash -c '...'"``) the analysis follows."""

_SHELLS: Final = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash"})
_STDIN_FILES: Final = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})


@dataclass(frozen=True, slots=True)
class _Options:
    """How a wrapper's own options look: which take a value, how many operands precede the
    wrapped command."""

    short_values: str = ""
    long_values: frozenset[str] = frozenset()
    operands: int = 0
    assignments: bool = False


_WRAPPERS: Final[dict[str, _Options]] = {
    "env": _Options("uCS", frozenset({"--unset", "--chdir", "--split-string"}), assignments=True),
    "exec": _Options("a"),
    "command": _Options(),
    "builtin": _Options(),
    "noglob": _Options(),
    "nohup": _Options(),
    "setsid": _Options(),
    "busybox": _Options(),
    "coproc": _Options(),
    "nice": _Options("n", frozenset({"--adjustment"})),
    "ionice": _Options("cnpt", frozenset({"--class", "--classdata", "--pid", "--pgid"})),
    "stdbuf": _Options("ioe", frozenset({"--input", "--output", "--error"})),
    "timeout": _Options("sk", frozenset({"--signal", "--kill-after"}), operands=1),
    "time": _Options("fo", frozenset({"--format", "--output"})),
    "xargs": _Options(
        "adEILnPs",
        frozenset(
            {
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            }
        ),
    ),
    "sudo": _Options(
        "ugpCrtUDRTh",
        frozenset(
            {
                "--user",
                "--group",
                "--prompt",
                "--close-from",
                "--role",
                "--type",
                "--other-user",
                "--chdir",
                "--chroot",
                "--command-timeout",
                "--host",
            }
        ),
        assignments=True,
    ),
    "doas": _Options("uC"),
}
"""Programs that run their arguments as a command, for deny and ask rules."""

_NAME_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=", re.DOTALL)


@dataclass(slots=True)
class _Collector:
    candidates: list[str] = field(default_factory=list)
    unanalysable: list[str] = field(default_factory=list)


def _collect(root: tree_sitter.Node, out: _Collector, *, depth: int) -> None:
    for node in _walk(root):
        if node.type == "command":
            _command_candidates(node, out, depth=depth)


def _command_candidates(node: tree_sitter.Node, out: _Collector, *, depth: int) -> None:
    _, words, _ = _command_parts(node)
    _peel(words, out, depth=depth)


_RESERVED_WORDS: Final = frozenset(
    {
        "!", "[[", "]]", "{", "}", "case", "coproc", "do", "done", "elif", "else", "esac",
        "fi", "for", "function", "if", "in", "select", "then", "until", "while",
    }
)  # fmt: skip
"""Bash's reserved words: never the name of a command that runs."""


def _peel(words: Sequence[_Word], out: _Collector, *, depth: int) -> None:
    """Record ``words`` as a command, then whatever command it runs in turn."""
    while words:
        name = words[0]
        if not name.fixed:
            out.unanalysable.append(f"the command name {name.text!r} is computed when it runs")
            return
        if name.literal and name.text in _RESERVED_WORDS:
            # A reserved word where a command name should be: the grammar did not follow the
            # shell here (``! if ...; fi`` parses as commands named "if", "then", "fi"). What
            # follows it is matched too, and a deny rule refuses what cannot be analysed.
            out.unanalysable.append(f"the shell keyword {name.text!r} stands as a command")
            words = words[1:]
            continue
        rest = words[1:]
        program = name.text.rsplit("/", 1)[-1] if "/" in name.text else name.text
        out.candidates.append(_render(words))
        if program != name.text:
            out.candidates.append(_render([_Word(program, literal=True), *rest]))
        if program in _SHELLS:
            _shell_string(program, rest, out, depth=depth)
            return
        if program in ("source", ".") and rest:
            script = rest[0]
            if not script.fixed or script.text in _STDIN_FILES:
                out.unanalysable.append(f"{program} runs {script.text!r}, not a fixed file")
            return
        if program in ("eval", "trap", "alias") or (program == "find" and rest):
            _strings(program, rest, out, depth=depth)
            return
        options = _WRAPPERS.get(program)
        if options is None:
            return
        if program == "command" and any(w.text in ("-v", "-V") for w in rest[:1]):
            return  # a lookup, not a run
        index = _skip_options(program, options, rest, out, depth=depth)
        if index is None:
            return
        words = rest[index:]


def _skip_options(
    program: str, options: _Options, words: Sequence[_Word], out: _Collector, *, depth: int
) -> int | None:
    """The index of the wrapped command in ``words`` (``None``: it cannot be told)."""
    index = 0
    operands = options.operands
    while index < len(words):
        word = words[index]
        if not word.fixed:
            out.unanalysable.append(f"{program}'s argument {word.text!r} is computed when it runs")
            return None
        text = word.text
        if text == "--":
            index += 1
            break
        if program == "xargs" and (
            text.startswith("--replace")
            or (text[:1] == "-" and text[:2] != "--" and ("I" in text or "i" in text))
        ):
            out.unanalysable.append("xargs -I builds the command from its input")
            return None
        if options.assignments and _NAME_ASSIGNMENT.match(text):
            index += 1
            continue
        if text.startswith("--"):
            name, equals, value = text.partition("=")
            index += 1
            if name in options.long_values and not equals:
                value = words[index].text if index < len(words) else ""
                index += 1
            if name == "--split-string":
                _parse_string(value, out, depth=depth)
            continue
        if text.startswith("-") and len(text) > 1:
            index += 1
            for position, letter in enumerate(text[1:], start=1):
                if letter in options.short_values:
                    value = text[position + 1 :]
                    if not value and index < len(words):
                        value = words[index].text
                        index += 1
                    if program == "env" and letter == "S":
                        _parse_string(value, out, depth=depth)
                    break
            continue
        if operands:
            operands -= 1
            index += 1
            continue
        break
    return index


def _shell_string(program: str, words: Sequence[_Word], out: _Collector, *, depth: int) -> None:
    """``bash -c 'STRING'``: parse STRING; a shell that reads its script from stdin is not
    analysable; ``bash FILE`` runs a file (matched as written)."""
    command_flag = False
    index = 0
    while index < len(words):
        word = words[index]
        if not word.fixed:
            out.unanalysable.append(f"{program}'s argument {word.text!r} is computed when it runs")
            return
        text = word.text
        index += 1
        if text == "--" or text == "-":
            break
        if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 1
            continue
        if text.startswith("--"):
            continue
        if text[:1] in "-+" and len(text) > 1:
            command_flag = command_flag or "c" in text[1:]
            if "s" in text[1:] and text[0] == "-":
                out.unanalysable.append(f"{program} -s reads its commands from stdin")
                return
            continue
        index -= 1
        break
    if not command_flag and index < len(words) and words[index].text in _STDIN_FILES:
        out.unanalysable.append(f"{program} {words[index].text} reads commands from stdin")
        return
    if command_flag:
        if index >= len(words):
            out.unanalysable.append(f"{program} -c has no command string")
            return
        script = words[index]
        if not script.fixed:
            out.unanalysable.append(f"{program} -c runs {script.text!r}, computed when it runs")
            return
        _parse_string(script.text, out, depth=depth)
    elif index >= len(words):
        out.unanalysable.append(f"{program} without -c or a script file reads commands from stdin")


def _strings(program: str, words: Sequence[_Word], out: _Collector, *, depth: int) -> None:
    """The command strings ``eval``, ``trap``, ``alias`` and ``find -exec`` run."""
    if program == "eval":
        if not all(word.literal for word in words):
            out.unanalysable.append("eval runs text computed when it runs")
            return
        _parse_string(" ".join(word.text for word in words), out, depth=depth)
    elif program == "trap":
        operands = [word for word in words if not word.text.startswith("-")]
        if operands and len(operands) > 1:
            if not operands[0].literal:
                out.unanalysable.append("trap runs text computed when it runs")
                return
            _parse_string(operands[0].text, out, depth=depth)
    elif program == "alias":
        for word in words:
            _, equals, value = word.text.partition("=")
            if not equals:
                continue
            if not word.literal:
                out.unanalysable.append("alias defines text computed when it runs")
                return
            _parse_string(value, out, depth=depth)
    else:  # find ... -exec COMMAND ... ; (or +)
        index = 0
        while index < len(words):
            if words[index].text in ("-exec", "-execdir", "-ok", "-okdir"):
                end = index + 1
                while end < len(words) and words[end].text not in (";", "+"):
                    end += 1
                _peel(words[index + 1 : end], out, depth=depth)
                index = end
            index += 1


def _parse_string(text: str, out: _Collector, *, depth: int) -> None:
    if depth + 1 > MAX_DEPTH:
        out.unanalysable.append(f"command strings are nested more than {MAX_DEPTH} deep")
        return
    tree = _parse(text)
    if tree is None or tree.root_node.has_error:
        where = "" if tree is None else f" ({_error_place(tree.root_node)})"
        out.unanalysable.append(f"the command string {text[:60]!r} does not parse{where}")
        return
    _collect(tree.root_node, out, depth=depth + 1)


def _render(words: Sequence[_Word]) -> str:
    return " ".join(word.text for word in words)
