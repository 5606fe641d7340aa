"""Bash permission rules decided on tree-sitter-bash's parse tree (issue 28, items 6 and 7).

The commands are the attacks issue 28 lists (allow rules that approved injected commands,
deny rules bypassed by ordinary syntax) and properties over every syntactic wrapper the
strategies know. ``tests/permissions/test_shell_rules.py`` runs them for real.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
from hypothesis import example, given, strategies as st

from tests.strategies import plain_commands, substituted_commands, wrapped_commands
from toolbatch.permissions import (
    MAX_DEPTH,
    PermissionMode,
    PermissionRule,
    Permissions,
    analyze_command,
)


def rules(mode: PermissionMode = "default", **lists: list[str]) -> Permissions:
    built = {
        behavior: tuple(PermissionRule.parse(text, behavior, source="test") for text in texts)  # type: ignore[arg-type]
        for behavior, texts in lists.items()
    }
    return Permissions(**built, mode=mode)


def decide(permissions: Permissions, command: str) -> str | None:
    return permissions.decide("run_shell_command", {"command": command}).behavior


ALLOW_INJECTIONS = [
    pytest.param("git status <(touch M)", id="process-substitution-in"),
    pytest.param("git status >(touch M)", id="process-substitution-out"),
    pytest.param("git status $'\\'' ; touch M ; echo $'\\''", id="ansi-c-quote"),
    pytest.param("git status #'\ntouch M\n#'", id="comment-across-lines"),
    pytest.param("git status $(touch M)", id="command-substitution"),
    pytest.param("git status `touch M`", id="backquotes"),
    pytest.param('git status "$(touch M)"', id="quoted-substitution"),
    pytest.param("git status; touch M", id="semicolon"),
    pytest.param("git status & touch M", id="background"),
    pytest.param("(git status)", id="subshell"),
    pytest.param("git status > $HOME/M", id="redirect-expansion"),
    pytest.param("git status <<EOF\n$(touch M)\nEOF", id="heredoc-expansion"),
    pytest.param("eval git status", id="eval"),
    pytest.param("git status $X", id="variable"),
    pytest.param("git status 'unterminated", id="unparsable"),
    pytest.param("LD_PRELOAD=x.so git status", id="unsafe-assignment"),
    pytest.param("git status '$(quoted but still not approved)'", id="quoted-marker"),
]


@pytest.mark.parametrize("command", ALLOW_INJECTIONS)
def test_an_allow_rule_approves_no_injected_command(command: str) -> None:
    """Only a plain sequence of literal simple commands, each covered, is approved."""
    decision = rules(allow=["Bash(git status:*)"]).decide("run_shell_command", {"command": command})
    assert decision.behavior is None
    assert decision.reason


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git status --short && git status -b",
        "git status | git status; git status || git status",
        "git status 'a && touch M' \"b c\" d'e'\"f\"",
        "git status > out.txt 2>&1 < /dev/null",
        "NODE_ENV=test git status",
        "timeout 30 git status",
        "git status <<'EOF'\n$HOME is not expanded\nEOF",
        "git status\ngit status -s",
    ],
)
def test_an_allow_rule_approves_plain_sequences(command: str) -> None:
    """Literal words, quotes, safe assignments, wrappers, literal redirects: approved."""
    assert decide(rules(allow=["Bash(git status:*)"]), command) == "allow"


DENY_REWRITES = [
    "(touch x)",
    "{ touch x; }",
    "if true; then touch x; fi",
    "! touch x",
    "'touch' x",
    "\\touch x",
    "/usr/bin/touch x",
    "env touch x",
    "exec touch x",
    "bash -c 'touch x'",
    "for i in 1; do touch x; done",
    "cat <(touch x)",
    "$'touch' x",
    "touch x",
]

# Found by the full Hypothesis profile: tree-sitter-bash reads a negated compound command as
# commands named "if", "then" and "fi"; such a tree is refused under a deny rule.
MISPARSED = ["! if true; then touch x; fi", "! while true; do touch x; done"]


@pytest.mark.parametrize("command", MISPARSED)
def test_a_keyword_read_as_a_command_is_denied_under_a_deny_rule(command: str) -> None:
    """A deny rule refuses a tree whose command names are shell keywords."""
    decision = rules(deny=["Bash(touch:*)"], allow=["Bash"]).decide(
        "run_shell_command", {"command": command}
    )
    assert decision.behavior == "deny"
    assert "shell keyword" in (decision.reason or "")


@pytest.mark.parametrize("command", DENY_REWRITES)
def test_a_deny_rule_matches_every_rewrite(command: str) -> None:
    """Subshells, groups, control flow, quoting, escapes, paths, wrappers, bash -c,
    substitutions: the deny rule matches the simple command inside (an allow-all too)."""
    decision = rules(deny=["Bash(touch:*)"], allow=["Bash"]).decide(
        "run_shell_command", {"command": command}
    )
    assert decision.behavior == "deny"
    assert decision.reason is None  # matched, not refused for being opaque


@pytest.mark.parametrize(
    "command",
    [
        "sudo -u root touch x",
        "xargs -n1 touch < list",
        "nice -n 5 nohup timeout -s KILL 5 touch x",
        "env -i A=1 -u B touch x",
        "find . -name '*.c' -exec touch {} +",
        "sh -c \"bash -c 'touch x'\"",
        "eval 'touch x'",
        "trap 'touch x' EXIT",
        "f() { touch x; }; f",
        "x=$(touch y)",
        "export A=$(touch y)",
        "t'ou'ch x",
        "command touch x",
        "busybox touch x",
        "env -S 'touch x'",
        "coproc touch x",
        "tou\\\nch x",
    ],
)
def test_a_deny_rule_follows_wrappers_and_command_strings(command: str) -> None:
    """Wrappers with their options, find -exec, eval, trap, functions, assignments."""
    assert decide(rules(deny=["Bash(touch:*)"]), command) == "deny"


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("$CMD x", id="variable-name"),
        pytest.param("$(echo touch) x", id="substituted-name"),
        pytest.param("t{ouch,} x", id="brace-name"),
        pytest.param("/usr/bin/tou* x", id="glob-name"),
        pytest.param("echo 'touch x' | sh", id="shell-from-stdin"),
        pytest.param('bash -c "$SCRIPT"', id="computed-string"),
        pytest.param("eval $X", id="computed-eval"),
        pytest.param("env $X x", id="computed-wrapper-argument"),
        pytest.param("touch x 'unterminated", id="unparsable"),
        pytest.param("if true; then touch x", id="missing-fi"),
        pytest.param("source <(echo touch x)", id="source-substitution"),
        pytest.param("echo touch x | bash /dev/stdin", id="shell-dev-stdin"),
        pytest.param("bash <<< 'touch x'", id="shell-here-string"),
        pytest.param("echo touch | xargs -I X X x", id="xargs-replace"),
        pytest.param("printf 'touch x' | xargs -I{} sh -c {}", id="xargs-replace-shell"),
    ],
)
def test_what_cannot_be_analysed_is_denied_when_a_deny_rule_applies(command: str) -> None:
    """A computed name, a shell reading stdin, a syntax error: denied, the reason said."""
    decision = rules(deny=["Bash(touch:*)"], allow=["Bash"]).decide(
        "run_shell_command", {"command": command}
    )
    assert decision.behavior == "deny"
    assert decision.reason is not None
    assert "cannot be analysed" in decision.reason
    assert decide(rules(ask=["Bash(touch:*)"]), command) in ("ask", "deny")
    assert decide(rules(allow=["Bash(ls:*)"]), command) is None


def test_command_strings_nest_only_so_deep() -> None:
    """bash -c strings are followed to MAX_DEPTH; deeper is unanalysable, never ignored."""
    command = "touch x"
    for _ in range(MAX_DEPTH):
        command = "bash -c " + shlex.quote(command)
    analysis = analyze_command(command)
    assert analysis.analysable
    assert "touch x" in analysis.candidates
    deeper = "bash -c " + shlex.quote(command)
    assert not analyze_command(deeper).analysable
    assert decide(rules(deny=["Bash(touch:*)"]), deeper) == "deny"


def test_a_deny_rule_does_not_refuse_what_it_can_analyse_and_does_not_match() -> None:
    """The deny rule stays precise: other commands go the usual way."""
    permissions = rules(deny=["Bash(touch:*)"], allow=["Bash(ls:*)"])
    assert decide(permissions, "ls -la && ls src") == "allow"
    assert decide(permissions, "echo touch x") is None  # an argument, not a command
    assert decide(permissions, "command -v touch") is None  # a lookup


def test_unanalysable_reasons_name_what_was_not_followed() -> None:
    """The reason a refusal gives says which construct could not be followed."""
    decision = rules(deny=["Bash(rm:*)"]).decide("run_shell_command", {"command": "$X -rf /"})
    assert decision.reason is not None
    assert "'$X'" in decision.reason


@pytest.mark.parametrize(
    ("command", "behavior"),
    [
        pytest.param("mkdir -p build/out && touch build/out/a", "allow", id="relative"),
        pytest.param("mv a b; cp -r c d", "allow", id="move-copy"),
        pytest.param("rm -rf /", None, id="absolute"),
        pytest.param("touch ../outside", None, id="parent"),
        pytest.param("touch ~/x", None, id="home"),
        pytest.param("sed -i s/a/b/ f", None, id="sed"),
        pytest.param("touch a > /tmp/x", None, id="redirect-outside"),
        pytest.param("touch $(echo a)", None, id="substitution"),
        pytest.param("git status", None, id="not-file-system"),
    ],
)
def test_accept_edits_approves_file_system_commands_inside_the_working_directory(
    command: str, behavior: str | None
) -> None:
    """acceptEdits: mkdir, touch, rm, rmdir, mv, cp on relative paths inside, plain only."""
    permissions = rules("acceptEdits", deny=["Bash(curl:*)"])
    assert decide(permissions, command) == behavior
    assert decide(rules(deny=["Bash(curl:*)"]), command) is None  # default mode asks


def test_settings_modes_are_claude_codes() -> None:
    """manual is default; without usable rules a default-mode rule set is empty."""
    assert rules("manual").mode == "default"
    assert rules().empty
    assert not rules("dontAsk").empty
    assert rules("plan").empty
    assert not rules(deny=["Bash(rm:*)"]).empty
    assert rules(deny=["Read(./.env)"]).empty  # a rule toolbatch cannot bind restricts nothing


def test_allow_summary_names_the_rules_and_their_file() -> None:
    """A headless refusal names the allow rules in force."""
    summary = rules(allow=["Bash(git status:*)", "Bash(ls:*)"]).allow_summary()
    assert summary == "the allow rules are 'Bash(git status:*)', 'Bash(ls:*)' (in test)"
    assert "no allow rule" in rules(deny=["Bash(rm:*)"]).allow_summary()


@given(wrapped_commands())
@example("sh -c \"bash -c 'touch x'\"")
def test_a_denied_command_in_any_wrapper_is_denied(command: str) -> None:
    """Property: any syntax that runs `touch` is denied by Bash(touch:*), allow-all or not."""
    assert decide(rules(deny=["Bash(touch:*)"], allow=["Bash"]), command) == "deny"


@given(substituted_commands())
def test_allow_never_approves_substitutions(command: str) -> None:
    """Property: text with $(, backquotes, <( or >( is never approved by an allow rule."""
    permissions = rules(allow=["Bash(git status:*)", "Bash(ls:*)", "Bash(echo:*)", "Bash(touch:*)"])
    assert decide(permissions, command) is None


@given(st.text())
def test_allow_never_approves_text_with_substitution_markers(text: str) -> None:
    """Property: whatever the text around them, the markers are never approved."""
    permissions = rules(allow=["Bash(echo:*)"])
    for marker in ("$(", "`", "<(", ">("):
        assert decide(permissions, f"echo {text}{marker}") is None


@given(plain_commands())
def test_plain_sequences_of_covered_commands_are_approved(command: str) -> None:
    """Property: each plain command covered by a rule means the sequence is approved."""
    permissions = rules(allow=["Bash(git status:*)", "Bash(ls:*)", "Bash(echo:*)"])
    assert decide(permissions, command) == "allow"
    assert decide(rules(allow=["Bash(git status:*)", "Bash(ls:*)"]), command) == (
        "allow" if all(c.words[0] != "echo" for c in analyze_command(command).plain) else None
    )


@given(st.text())
def test_analysis_never_raises(text: str) -> None:
    """Property: any text (lone surrogates included) is analysed or said unanalysable."""
    analysis = analyze_command(text)
    assert analysis.plain or analysis.not_plain is not None


_FUZZ = """
import sys
from hypothesis import given, seed, settings, strategies as st
from toolbatch.permissions import analyze_command

@seed(int(sys.argv[1]))
@settings(max_examples=300, deadline=None, database=None)
@given(st.text())
def fuzz(text):
    for marker in ("$(", "`", "<(", ">("):
        analyze_command(f"echo {text}{marker}")

fuzz()
"""


@pytest.mark.parametrize("seed", [1, 2, 6])
def test_the_parser_survives_arbitrary_text(seed: int) -> None:
    """Arbitrary text never crashes the process (tree-sitter-bash's scanner segfaults on
    some code points; seeds 2 and 6 found them)."""
    done = subprocess.run(
        [sys.executable, "-c", _FUZZ, str(seed)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_text_the_parser_would_crash_on_is_asked_and_refused_under_deny() -> None:
    """``{`` and a plane-13 code point crash tree-sitter-bash: never parsed, never approved,
    refused under a deny rule."""
    command = "echo {\U000d6963"
    assert decide(rules(allow=["Bash(echo:*)"]), command) is None
    denied = rules(deny=["Bash(touch:*)"], allow=["Bash"]).decide(
        "run_shell_command", {"command": command}
    )
    assert denied.behavior == "deny"
