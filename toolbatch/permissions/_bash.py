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

The parse and its words are in ``_syntax``, the deny and ask scan in ``_candidates``, the
plain sequences allow rules approve in ``_plain``; this module combines them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from toolbatch.permissions._candidates import MAX_DEPTH, _collect, _Collector
from toolbatch.permissions._plain import SAFE_ENV_ASSIGNMENTS, SimpleCommand, _plain_sequence
from toolbatch.permissions._syntax import _error_place, _parse

__all__ = [
    "MAX_DEPTH",
    "SAFE_ENV_ASSIGNMENTS",
    "CommandAnalysis",
    "SimpleCommand",
    "analyze_command",
]

_SUBSTITUTION_MARKERS: Final = ("$(", "`", "<(", ">(")


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
