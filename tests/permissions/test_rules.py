"""Claude Code's permission rules, as its documentation states them (section 2 of
shared/reference/ecosystem-2.md, code.claude.com/docs/en/permissions)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st
from structlog.testing import capture_logs

from toolbatch.errors import ConfigError
from toolbatch.permissions import PermissionRule, Permissions, analyze_command


def rules(**lists: list[str]) -> Permissions:
    built = {
        behavior: tuple(PermissionRule.parse(text, behavior, source="test") for text in texts)  # type: ignore[arg-type]
        for behavior, texts in lists.items()
    }
    return Permissions(**built)


def shell(command: str) -> dict[str, object]:
    return {"command": command}


@pytest.mark.parametrize(
    ("rule", "command", "matches"),
    [
        pytest.param("Bash(npm run build)", "npm run build", True, id="exact"),
        pytest.param("Bash(npm run build)", "npm run build --prod", False, id="exact-only"),
        pytest.param("Bash(npm run test *)", "npm run test --watch", True, id="prefix"),
        pytest.param("Bash(npm run test:*)", "npm run test --watch", True, id="legacy-prefix"),
        pytest.param("Bash(ls *)", "ls -la", True, id="word-boundary"),
        pytest.param("Bash(ls *)", "ls", True, id="word-boundary-bare"),
        pytest.param("Bash(ls *)", "lsof", False, id="word-boundary-refuses-lsof"),
        pytest.param("Bash(ls*)", "lsof", True, id="no-boundary"),
        pytest.param("Bash(* install)", "npm install", True, id="suffix"),
        pytest.param("Bash(git * main)", "git push origin main", True, id="middle-spans-spaces"),
        pytest.param("Bash(git:* push)", "git status push", False, id="colon-literal-mid"),
        pytest.param("Bash", "anything at all", True, id="bare"),
        pytest.param("Bash(*)", "anything at all", True, id="star"),
        pytest.param("run_shell_command(git *)", "git log", True, id="own-name"),
    ],
)
def test_bash_specifiers(rule: str, command: str, matches: bool) -> None:
    """Exact, glob, word boundary, legacy :*, and the shell's own name."""
    decision = rules(deny=[rule]).decide("run_shell_command", shell(command))
    assert (decision.behavior == "deny") is matches


def test_deny_wins_over_ask_over_allow_whatever_the_specificity() -> None:
    """The order is deny, ask, allow; the first match decides."""
    permissions = rules(
        allow=["Bash(git push origin main)"], ask=["Bash(git push *)"], deny=["Bash(git *)"]
    )
    assert permissions.decide("run_shell_command", shell("git push origin main")).behavior == "deny"
    permissions = rules(allow=["Bash(git push origin main)"], ask=["Bash(git push *)"])
    decision = permissions.decide("run_shell_command", shell("git push origin main"))
    assert decision.behavior == "ask"
    assert decision.rule is not None
    assert decision.rule.text == "Bash(git push *)"


@pytest.mark.parametrize(
    ("command", "behavior"),
    [
        pytest.param("git status && npm test", "allow", id="each-covered"),
        pytest.param("git status && rm -rf /", None, id="one-uncovered"),
        pytest.param("git status; rm -rf /", None, id="semicolon"),
        pytest.param("git status | rm -rf /", None, id="pipe"),
        pytest.param("git status\nrm -rf /", None, id="newline"),
        pytest.param("git status & rm -rf /", None, id="background"),
        pytest.param("git status $(rm -rf /)", None, id="substitution"),
        pytest.param("git status `rm -rf /`", None, id="backquotes"),
        pytest.param("git status 'a && rm -rf /'", "allow", id="quoted-operator"),
        pytest.param("timeout 30 npm test", "allow", id="timeout-wrapper"),
        pytest.param("nice -n 5 npm test", "allow", id="nice-wrapper"),
        pytest.param("xargs git status", "allow", id="bare-xargs"),
        pytest.param("xargs -n1 git status", None, id="xargs-flags"),
        pytest.param("NODE_ENV=test npm test", "allow", id="safe-assignment"),
        pytest.param("LD_PRELOAD=x.so npm test", None, id="unsafe-assignment"),
        pytest.param("git status 2>&1", "allow", id="redirect-is-not-a-separator"),
    ],
)
def test_compound_commands_need_every_subcommand_allowed(
    command: str, behavior: str | None
) -> None:
    """A rule must match each subcommand; wrappers and safe assignments are looked past."""
    permissions = rules(allow=["Bash(git status *)", "Bash(npm test *)"])
    assert permissions.decide("run_shell_command", shell(command)).behavior == behavior


@pytest.mark.parametrize(
    "command",
    [
        "ls && rm -rf tmp",
        "FOO=bar rm -rf tmp",
        "echo $(rm -rf tmp)",
        "timeout 5 rm -rf tmp",
        "true || rm -rf tmp",
    ],
)
def test_a_deny_matches_any_subcommand(command: str) -> None:
    """Deny and ask rules look past any assignment and match any subcommand."""
    decision = rules(deny=["Bash(rm *)"], allow=["Bash"]).decide(
        "run_shell_command", shell(command)
    )
    assert decision.behavior == "deny"


def test_mcp_server_rules_cover_every_tool_of_the_server() -> None:
    """mcp__srv is mcp__srv__*; mcp__srv__tool one tool; globs after the server."""
    permissions = rules(
        deny=["mcp__github__delete_repo"], ask=["mcp__github"], allow=["mcp__docs__get_*"]
    )
    assert permissions.decide("mcp__github__delete_repo", {}).behavior == "deny"
    assert permissions.decide("mcp__github__create_issue", {}).behavior == "ask"
    assert permissions.decide("mcp__githubber__x", {}).behavior is None  # not a prefix match
    assert permissions.decide("mcp__docs__get_page", {}).behavior == "allow"
    assert permissions.decide("mcp__docs__put_page", {}).behavior is None


def test_unanchored_allow_globs_are_skipped_with_a_warning() -> None:
    """'*' and 'mcp__*' in allow are ignored (they would allow everything); in deny they count."""
    with capture_logs() as logs:
        permissions = rules(allow=["*", "mcp__*"])
    assert permissions.decide("mcp__a__b", {}).behavior is None
    assert [log["rule"] for log in logs if log["event"] == "permissions.rule_ignored"] == [
        "*",
        "mcp__*",
    ]
    assert rules(deny=["mcp__*"]).decide("mcp__a__b", {}).behavior == "deny"
    assert rules(ask=["*"]).decide("anything", {}).behavior == "ask"


def test_parameter_rules_for_deny_and_ask() -> None:
    """Tool(param:value) matches a top-level scalar; an omitted parameter never matches."""
    permissions = rules(ask=["deploy(env:prod*)", "Bash(run_in_background:true)"])
    assert permissions.decide("deploy", {"env": "production"}).behavior == "ask"
    assert permissions.decide("deploy", {"env": "staging"}).behavior is None
    assert permissions.decide("deploy", {}).behavior is None
    assert permissions.decide("deploy", {"env": {"nested": 1}}).behavior is None


def test_rules_that_cannot_bind_here_match_nothing() -> None:
    """Read/Edit paths, Bash(command:...) and allow parameter rules are warned and ignored."""
    with capture_logs() as logs:
        permissions = rules(deny=["Read(./.env)", "Bash(command:rm *)"], allow=["deploy(env:x)"])
    assert permissions.decide("run_shell_command", shell("rm -rf /")).behavior is None
    assert permissions.decide("deploy", {"env": "x"}).behavior is None
    assert len([log for log in logs if log["event"] == "permissions.rule_ignored"]) == 3


def test_a_bare_deny_hides_the_tool_a_scoped_one_does_not() -> None:
    """Bare-name and glob denies remove a tool from the model's view."""
    assert rules(deny=["Bash"]).hidden("run_shell_command") is not None
    assert rules(deny=["mcp__*"]).hidden("mcp__a__b") is not None
    assert rules(deny=["Bash(rm *)"]).hidden("run_shell_command") is None


@pytest.mark.parametrize("text", ["", "Bash(", "(x)", "a b"])
def test_a_malformed_rule_is_a_config_error(text: str) -> None:
    """A rule that is not Tool or Tool(specifier) names itself and the fix."""
    with pytest.raises(ConfigError, match="not a permission rule"):
        PermissionRule.parse(text, "allow", source="settings.json")


words = st.text(alphabet="abcdefgh-", min_size=1, max_size=6)
simple = st.lists(words, min_size=1, max_size=4).map(" ".join)
separators = st.sampled_from([" && ", " || ", "; ", " | ", "\n"])


@given(st.lists(simple, min_size=1, max_size=5), separators)
def test_allow_holds_only_when_every_subcommand_is_covered(
    commands: list[str], separator: str
) -> None:
    """Property: an allow of a compound command means each part alone is allowed."""
    permissions = rules(allow=["Bash(a *)", "Bash(b*)"])
    compound = separator.join(commands)
    whole = permissions.decide("run_shell_command", shell(compound)).behavior == "allow"
    parts = [sub.text for sub in analyze_command(compound).plain]
    assert whole == all(
        permissions.decide("run_shell_command", shell(part)).behavior == "allow" for part in parts
    )
