"""tree-sitter-bash's parse of a shell command and its words, decoded from any quoting.

Pure logic, no I/O. The parser is never given text it crashes on (``_PARSER_SAFE_BELOW``);
a word is literal only when nothing in it expands when the command runs.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import tree_sitter
import tree_sitter_bash

_LANGUAGE: Final = tree_sitter.Language(tree_sitter_bash.language())
_PARSERS = threading.local()  # a Parser is not meant to be shared between threads

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
