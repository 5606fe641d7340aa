"""Shell-command analysis for ``Bash(...)`` permission rules, on tree-sitter-bash's parse tree.

Pure logic, no I/O. ``analyze_command(text)`` parses the command once and answers the two
questions the rules ask (toolbatch/permissions/README.md has the whole story):

* **May an allow rule approve it?** Only when the whole command is a *plain sequence*:
  simple commands of literal words (plain words, quoted strings without expansions,
  concatenations of those), joined by ``&&``, ``||``, ``;``, ``|`` or newlines, with
  redirections to literal paths. ``CommandAnalysis.plain`` holds the simple commands, with
  Claude Code's wrappers stripped (``timeout``, ``time``, ``nice``, ``nohup``, ``stdbuf``,
  ``command``, ``builtin``, ``noglob``, flagless ``xargs``); ``not_plain`` says why not
  (a process substitution, a subshell, a comment, ...).
* **What could a deny or ask rule match?** Every simple command anywhere in the tree
  (subshells, groups, control flow, functions, command and process substitutions), with
  names decoded from any quoting (``'touch'``, ``\\touch``, ``$'touch'``), after any wrapper
  (``env``, ``exec``, ``sudo``, ``xargs`` with options, ...), by basename
  (``/usr/bin/touch`` is also ``touch``), and inside ``bash -c '...'``, ``eval``, ``trap``
  and ``alias`` strings, parsed in turn (to ``MAX_DEPTH``). ``unanalysable`` says what could
  not be followed (a syntax error, a command name from an expansion, a shell reading its
  script from stdin): with a deny rule in force such a command is refused.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

import tree_sitter
import tree_sitter_bash

__all__ = [
    "MAX_DEPTH",
    "SAFE_ENV_ASSIGNMENTS",
    "CommandAnalysis",
    "SimpleCommand",
    "analyze_command",
]

MAX_DEPTH: Final = 4
"""How many command strings deep (``bash -c "bash -c '...'"``) the analysis follows."""

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

_LANGUAGE: Final = tree_sitter.Language(tree_sitter_bash.language())
_PARSERS = threading.local()  # a Parser is not meant to be shared between threads

_SHELLS: Final = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash"})
_STDIN_FILES: Final = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})
_CC_WRAPPERS: Final = frozenset(
    {"timeout", "time", "nice", "nohup", "stdbuf", "command", "builtin", "noglob"}
)
"""The wrappers Claude Code strips before an allow rule is matched (and flagless xargs)."""


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

_WORD_NODES: Final = frozenset(
    {
        "word",
        "string",
        "raw_string",
        "ansi_c_string",
        "number",
        "concatenation",
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "translated_string",
    }
)
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
_SUBSTITUTION_MARKERS: Final = ("$(", "`", "<(", ">(")
_SEPARATORS: Final = frozenset({"&&", "||", ";", "|", "|&", "\n"})
_ANSI_C: Final = re.compile(
    r"\\(?:x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{1,4})|U([0-9a-fA-F]{1,8})|([0-7]{1,3})|c(.)|(.))",
    re.DOTALL,
)
_ANSI_C_SIMPLE: Final = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_NAME_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=", re.DOTALL)
_SAFE_WORD: Final = re.compile(r"[\w@%+=:,./-]+", re.ASCII)


@dataclass(frozen=True, slots=True)
class _Word:
    """One shell word: its value when literal, else its source text."""

    text: str
    literal: bool
    pattern: bool = False  # unquoted glob or brace characters: it may become other words

    @property
    def fixed(self) -> bool:
        """Literal and expanding to exactly itself (where a command name must be)."""
        return self.literal and not self.pattern


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


@dataclass(frozen=True, slots=True)
class CommandAnalysis:
    """What the rules need to know about one shell command.

    Attributes:
        plain: the simple commands when the whole command is a plain sequence (see the
            module docstring), else ``()``.
        not_plain: why it is not a plain sequence (``None`` when it is).
        candidates: every text a deny or ask rule is matched against: each simple command
            anywhere in the tree, as written and after each wrapper, by basename too.
        unanalysable: what could not be followed (``()`` when everything was).
    """

    plain: tuple[SimpleCommand, ...] = ()
    not_plain: str | None = None
    candidates: tuple[str, ...] = ()
    unanalysable: tuple[str, ...] = ()

    @property
    def analysable(self) -> bool:
        """Whether every simple command in the command was found."""
        return not self.unanalysable


@dataclass(slots=True)
class _Collector:
    candidates: list[str] = field(default_factory=list)
    unanalysable: list[str] = field(default_factory=list)


def analyze_command(command: str) -> CommandAnalysis:
    """Parse ``command`` with tree-sitter-bash and analyse it for the permission rules."""
    tree = _parse(command)
    if tree is None:
        reason = (
            "it is not text the parser takes (lone surrogates, or code points from U+30000 "
            "on, which crash tree-sitter-bash)"
        )
        return CommandAnalysis(not_plain=reason, unanalysable=(reason,))
    root = tree.root_node
    if root.has_error:
        reason = f"it does not parse as bash ({_error_place(root)})"
        return CommandAnalysis(not_plain=reason, unanalysable=(reason,))
    collector = _Collector()
    _collect(root, collector, depth=0)
    plain, not_plain = _plain_sequence(root)
    if "\\\n" in command:
        # bash joins "tou\<newline>ch" into one word where tree-sitter sees two: deny and
        # ask rules also see the joined text; allow rules approve neither.
        joined = _parse(command.replace("\\\n", ""))
        if joined is None or joined.root_node.has_error:
            collector.unanalysable.append("a line continuation (backslash-newline)")
        else:
            _collect(joined.root_node, collector, depth=0)
        plain, not_plain = None, "a line continuation (backslash-newline)"
    marker = next((m for m in _SUBSTITUTION_MARKERS if m in command), None)
    if plain is not None and marker is not None:
        # Quoted, it is harmless to bash; but an allow rule is the one place where a parser
        # that reads it differently from bash would run something: never approve it.
        plain, not_plain = None, f"the text {marker!r}, which allow rules never approve"
    if plain is not None and not plain:
        plain, not_plain = None, "it runs no command"
    return CommandAnalysis(
        plain=tuple(plain or ()),
        not_plain=not_plain,
        candidates=tuple(dict.fromkeys(collector.candidates)),
        unanalysable=tuple(dict.fromkeys(collector.unanalysable)),
    )


# -- parsing -----------------------------------------------------------------------------


_PARSER_SAFE_BELOW: Final = 0x30000
"""tree-sitter-bash's scanner crashes the process (SIGSEGV) on some code points from U+33080
on (``"{" + chr(0xD6963)``, found by Hypothesis; 0.23 and 0.25 alike): text holding any
code point from plane 3 on is never given to it, and is judged unanalysable instead."""
_BEYOND_SAFE: Final = re.compile(f"[{chr(_PARSER_SAFE_BELOW)}-{chr(0x10FFFF)}]")


def _parse(command: str) -> tree_sitter.Tree | None:
    if _BEYOND_SAFE.search(command):
        return None
    try:
        source = command.encode("utf-8")
    except UnicodeEncodeError:
        return None
    parser = getattr(_PARSERS, "parser", None)
    if parser is None:
        parser = _PARSERS.parser = tree_sitter.Parser(_LANGUAGE)
    return parser.parse(source)


def _text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode("utf-8", errors="replace")


def _error_place(root: tree_sitter.Node) -> str:
    for node in _walk(root):
        if node.is_missing:
            return f"a missing {node.type!r} at line {node.start_point[0] + 1}"
        if node.is_error:
            snippet = _text(node)[:40]
            return f"a syntax error at line {node.start_point[0] + 1}: {snippet!r}"
    return "a syntax error"


def _walk(root: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """Every node under ``root``, depth first, without recursion (trees can be deep)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


# -- words -------------------------------------------------------------------------------


def _word(node: tree_sitter.Node) -> _Word:
    kind = node.type
    source = _text(node)
    if kind == "word":
        return _unquoted(source)
    if kind == "number":
        return _Word(source, literal=True)
    if kind == "raw_string":
        return _Word(source[1:-1], literal=True)
    if kind == "ansi_c_string":
        return _Word(_ansi_c(source[2:-1]), literal=True)
    if kind == "string":
        if any(child.is_named and child.type != "string_content" for child in node.children):
            return _Word(source, literal=False)
        return _Word(_double_quoted(source[1:-1]), literal=True)
    if kind == "concatenation":
        parts = [_word(child) for child in node.children]
        return _Word(
            "".join(part.text for part in parts),
            literal=all(part.literal for part in parts),
            pattern=any(part.pattern for part in parts),
        )
    return _Word(source, literal=False)


def _unquoted(source: str) -> _Word:
    out: list[str] = []
    pattern = False
    literal = True
    index = 0
    while index < len(source):
        char = source[index]
        if char == "\\":
            if index + 1 < len(source) and source[index + 1] != "\n":
                out.append(source[index + 1])
            index += 2
            continue
        if char in "*?[{}":
            pattern = True
        elif char in "$`":
            literal = False  # tree-sitter keeps some expansions inside words
        out.append(char)
        index += 1
    return _Word("".join(out), literal=literal, pattern=pattern)


def _double_quoted(inner: str) -> str:
    return re.sub(r'\\([\\"$`\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), inner)


def _ansi_c(inner: str) -> str:
    def escape(match: re.Match[str]) -> str:
        hex2, hex4, hex8, octal, control, other = match.groups()
        number = hex2 or hex4 or hex8
        if number is not None:
            return chr(min(int(number, 16), 0x10FFFF))
        if octal is not None:
            return chr(int(octal, 8) & 0xFF)
        if control is not None:
            return chr(ord(control) & 0x1F)
        return _ANSI_C_SIMPLE.get(other, "\\" + other)

    return _ANSI_C.sub(escape, inner)


def _quote(word: str) -> str:
    if word and _SAFE_WORD.fullmatch(word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


# -- deny and ask: every simple command anywhere ------------------------------------------


def _collect(root: tree_sitter.Node, out: _Collector, *, depth: int) -> None:
    for node in _walk(root):
        if node.type == "command":
            _command_candidates(node, out, depth=depth)


def _command_parts(
    node: tree_sitter.Node,
) -> tuple[list[tuple[str, _Word | None]], list[_Word], list[tree_sitter.Node]]:
    """A command node's assignments, words (name first) and redirect nodes."""
    assignments: list[tuple[str, _Word | None]] = []
    words: list[_Word] = []
    redirects: list[tree_sitter.Node] = []
    for index, child in enumerate(node.children):
        name = node.field_name_for_child(index)
        if child.type == "variable_assignment":
            variable = child.child_by_field_name("name")
            value = child.child_by_field_name("value")
            assignments.append(
                (_text(variable) if variable is not None else "", _word(value) if value else None)
            )
        elif child.type == "command_name":
            inner = child.named_children
            words.append(_word(inner[0]) if len(inner) == 1 else _Word(_text(child), False))
        elif name == "redirect":
            redirects.append(child)
        elif child.is_named and child.type in _WORD_NODES:
            words.append(_word(child))
        elif child.type != "comment":
            words.append(_Word(_text(child), literal=False))  # e.g. the "$" of $"..."
    return assignments, words, redirects


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


# -- allow: a plain sequence of simple commands --------------------------------------------


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
