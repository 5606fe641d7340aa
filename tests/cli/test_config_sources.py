"""Claude Code's configuration flags through the command line: every form of --mcp-config
and --settings, --setting-sources, --strict-mcp-config, --allowedTools and
--disallowedTools. The forms a shell makes (``<(...)``, a /dev/fd path) go through the real
process; the rest call ``main(argv)`` in this one."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli._support import ECHO_MCP_SERVER, TOOLBATCH, invoke_toolbatch, run_toolbatch
from toolbatch import ToolCall, ToolScheduler, default_registry
from toolbatch.cli._config_sources import split_rules
from toolbatch.cli._options import _parser
from toolbatch.cli._runtime import _scheduler_config

SERVER: dict[str, Any] = ECHO_MCP_SERVER


def responses(done: subprocess.CompletedProcess[bytes]) -> dict[str, dict[str, Any]]:
    """Each call's function response, by id, from ``--output-format json``."""
    assert done.returncode == 0, done.stderr.decode()
    events = json.loads(done.stdout)
    parts = json.loads(next(e for e in events if e["type"] == "result")["result"])
    return {
        p["functionResponse"]["id"]: p["functionResponse"]["response"]
        for p in parts
        if "functionResponse" in p
    }


def batch(*names: str) -> bytes:
    calls = [{"id": name, "name": f"mcp__{name}__echo", "args": {"text": name}} for name in names]
    return json.dumps(calls).encode()


RUN = ["run", "--output-format", "json", "--sandbox", "off"]


def test_mcp_config_takes_a_json_string_a_dev_fd_path_a_file_and_codex_toml(
    tmp_path: Path,
) -> None:
    """Four servers from four forms in one run, as `claude --mcp-config` takes them (the
    issue: the JSON string and <(...) failed 'is not a file', config.toml 'not valid JSON')."""
    inline = json.dumps({"mcpServers": {"inline": SERVER}})
    piped = json.dumps({"mcpServers": {"piped": SERVER}})
    (tmp_path / "file.json").write_text(json.dumps({"mcpServers": {"file": SERVER}}))
    codex = tmp_path / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text(
        'model = "o4"\n\n[mcp_servers.codex]\n'
        f"command = {json.dumps(SERVER['command'])}\n"
        f"args = {json.dumps(SERVER['args'])}\n"
        "startup_timeout_sec = 30\ntool_timeout_sec = 20\nrequired = true\n"
    )
    command = [
        *TOOLBATCH,
        *RUN,
        "--artifacts-dir",
        str(tmp_path / "a"),
        "--mcp-config",
        inline,
        "--mcp-config",
        f"<(printf %s {shlex.quote(piped)})",
        "--mcp-config",
        "file.json",
        "--mcp-config",
        str(codex),
    ]
    # bash turns <(...) into /dev/fd/N, exactly as a user's shell does.
    script = " ".join(part if part.startswith("<(") else shlex.quote(part) for part in command)
    done = subprocess.run(
        ["bash", "-c", script],
        input=batch("inline", "piped", "file", "codex"),
        capture_output=True,
        cwd=tmp_path,
        timeout=90,
        check=False,
    )
    assert responses(done) == {
        "inline": {"output": "inline"},
        "piped": {"output": "piped"},
        "file": {"output": "file"},
        "codex": {"output": "codex"},
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param('{"mcpServers": {', "looks like inline JSON but is not valid", id="json"),
        pytest.param("missing.json", "cannot read the MCP config file", id="missing"),
        pytest.param("bad.toml", "has no [mcp_servers.NAME] table", id="toml"),
    ],
)
def test_a_bad_mcp_config_is_a_usage_error_naming_it(
    tmp_path: Path, value: str, expected: str
) -> None:
    """Exit 2, nothing on stdout, the value and the fix on stderr."""
    (tmp_path / "bad.toml").write_text('model = "o4"\n')
    done = invoke_toolbatch("run", "--mcp-config", value, stdin=b"[]", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == b""
    assert expected in done.stderr.decode()


def _guard(path: Path) -> None:
    """A PreToolUse hook denying every command that mentions 'forbidden'."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/bash\n"
        "if jq -r .tool_input.command | grep -q forbidden; then echo 'guarded' >&2; exit 2; fi\n"
    )
    path.chmod(0o755)


def _project(root: Path) -> None:
    """A repository with its own hooks and its own MCP server, as Claude Code lays them out."""
    hook = {"type": "command", "command": '"$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh'}
    _guard(root / ".claude" / "hooks" / "guard.sh")
    (root / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}})
    )
    (root / ".claude" / "settings.local.json").write_text(
        json.dumps({"permissions": {"deny": ["Bash(rm *)"]}})
    )
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": SERVER}}))


SHELL_CALLS = [
    {"id": "f", "name": "run_shell_command", "args": {"command": "echo forbidden"}},
    {"id": "r", "name": "run_shell_command", "args": {"command": "rm -f nothing-here"}},
    {"id": "m", "name": "mcp__proj__echo", "args": {"text": "proj"}},
]


def test_nothing_is_loaded_from_the_project_unless_asked(tmp_path: Path) -> None:
    """A batch run inside a repository runs none of its hooks and starts none of its servers."""
    _project(tmp_path)
    done = invoke_toolbatch(
        *RUN,
        "--artifacts-dir",
        str(tmp_path / "a"),
        stdin=json.dumps(SHELL_CALLS).encode(),
        cwd=tmp_path,
        env={"HOME": str(tmp_path / "home")},
    )
    got = responses(done)
    assert got["f"]["output"].startswith("forbidden")
    assert "error" not in got["r"]
    assert "unknown tool 'mcp__proj__echo'" in got["m"]["error"]


def test_setting_sources_load_the_hierarchy_and_the_projects_mcp_json(tmp_path: Path) -> None:
    """--setting-sources user,project,local: ~/.claude/settings.json, .claude/settings.json,
    .claude/settings.local.json and .mcp.json, as Claude Code loads them."""
    _project(tmp_path)
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Bash(curl *)"]}})
    )
    calls = [
        *SHELL_CALLS,
        {"id": "c", "name": "run_shell_command", "args": {"command": "curl http://x"}},
    ]
    done = invoke_toolbatch(
        *RUN,
        "--setting-sources",
        "user,project,local",
        # With rules in force, a headless run runs only what an allow rule covers.
        "--allowedTools",
        "mcp__proj__echo",
        "--artifacts-dir",
        str(tmp_path / "a"),
        stdin=json.dumps(calls).encode(),
        cwd=tmp_path,
        env={"HOME": str(home)},
    )
    got = responses(done)
    assert "guarded" in got["f"]["error"]  # the project's hook
    assert "'Bash(rm *)' (deny" in got["r"]["error"]  # the local file's rule
    assert "'Bash(curl *)' (deny" in got["c"]["error"]  # the user's rule
    assert got["m"] == {"output": "proj"}  # the project's .mcp.json


def test_strict_mcp_config_uses_only_the_flags_servers(tmp_path: Path) -> None:
    """--strict-mcp-config: .mcp.json and a settings file's mcpServers are ignored."""
    _project(tmp_path)
    settings = json.dumps({"mcpServers": {"fromsettings": SERVER}})
    done = invoke_toolbatch(
        *RUN,
        "--setting-sources",
        "project",
        "--settings",
        settings,
        "--strict-mcp-config",
        "--mcp-config",
        json.dumps({"mcpServers": {"flag": SERVER}}),
        "--artifacts-dir",
        str(tmp_path / "a"),
        stdin=batch("flag", "proj", "fromsettings"),
        cwd=tmp_path,
    )
    got = responses(done)
    assert got["flag"] == {"output": "flag"}
    assert "unknown tool" in got["proj"]["error"]
    assert "unknown tool" in got["fromsettings"]["error"]


def test_user_and_local_mcp_servers_come_from_claude_json(tmp_path: Path) -> None:
    """~/.claude.json: top-level servers (user scope) and this project's (local scope)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "numStartups": 3,
                "mcpServers": {"usr": SERVER},
                "projects": {str(tmp_path): {"mcpServers": {"loc": SERVER}}},
            }
        )
    )
    done = invoke_toolbatch(
        *RUN,
        "--setting-sources",
        "user,local",
        "--artifacts-dir",
        str(tmp_path / "a"),
        stdin=batch("usr", "loc"),
        cwd=tmp_path,
        env={"HOME": str(home)},
    )
    assert responses(done) == {"usr": {"output": "usr"}, "loc": {"output": "loc"}}


def test_settings_take_a_json_string_and_a_dev_fd_path(tmp_path: Path) -> None:
    """--settings '{...}' and --settings <(...), merged in order."""
    deny_rm = json.dumps({"permissions": {"deny": ["Bash(rm *)"]}})
    deny_curl = json.dumps({"permissions": {"deny": ["Bash(curl *)"]}})
    calls = [
        {"id": "r", "name": "run_shell_command", "args": {"command": "rm -f x"}},
        {"id": "c", "name": "run_shell_command", "args": {"command": "curl http://x"}},
    ]
    command = [*TOOLBATCH, *RUN, "--artifacts-dir", str(tmp_path / "a"), "--settings", deny_rm]
    script = " ".join(map(shlex.quote, command)) + f" --settings <(echo {shlex.quote(deny_curl)})"
    done = subprocess.run(
        ["bash", "-c", script],
        input=json.dumps(calls).encode(),
        capture_output=True,
        cwd=tmp_path,
        timeout=90,
        check=False,
    )
    got = responses(done)
    assert "'Bash(rm *)' (deny, in settings[0] (inline JSON))" in got["r"]["error"]
    assert "'Bash(curl *)' (deny" in got["c"]["error"]


def test_an_unknown_setting_source_is_a_usage_error(tmp_path: Path) -> None:
    done = invoke_toolbatch("run", "--setting-sources", "user,team", stdin=b"[]", cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown setting source(s) 'team'" in done.stderr.decode()


def test_disallowed_tools_deny_and_hide(tmp_path: Path) -> None:
    """--disallowedTools: a scoped rule denies matching calls, naming the flag; a bare
    name removes the tools from the model's list. A real process: the hidden server may
    still be starting when the run ends, and its process is then left unwaited (reaped at
    the command's exit; in this process it would be a zombie and a ResourceWarning)."""
    done = run_toolbatch(
        *RUN,
        "--disallowedTools",
        "Bash(rm *),mcp__t",
        "--mcp-config",
        json.dumps({"mcpServers": {"t": SERVER}}),
        "--artifacts-dir",
        str(tmp_path / "a"),
        stdin=json.dumps(
            [
                {"id": "r", "name": "run_shell_command", "args": {"command": "rm -f x"}},
                {"id": "t", "name": "mcp__t__echo", "args": {"text": "x"}},
            ]
        ).encode(),
        cwd=tmp_path,
    )
    got = responses(done)
    assert "'Bash(rm *)' (deny, in --disallowedTools)" in got["r"]["error"]
    assert "mcp__t__echo" in got["t"]["error"]


async def test_allowed_tools_skip_the_question(tmp_path: Path) -> None:
    """--allowedTools "Bash(git status:*) Bash(echo *)": those commands run without asking
    approve; others are asked."""
    args = _parser().parse_args(
        [
            "serve",
            "--allowedTools",
            "Bash(git status:*) Bash(echo *)",
            "--artifacts-dir",
            str(tmp_path / "a"),
            "--sandbox",
            "off",
        ]
    )
    asked: list[str] = []

    def approve(call: ToolCall, declaration: object) -> bool:
        asked.append(str(call.args["command"]))
        return True

    calls = [
        ToolCall(id="a", name="run_shell_command", args={"command": "echo allowed"}),
        ToolCall(id="b", name="run_shell_command", args={"command": "true"}),
    ]
    async with ToolScheduler(default_registry(), _scheduler_config(args)) as scheduler:
        turn = await scheduler.run_batch(calls, approve=approve)
    assert [r.status for r in turn.responses] == ["success", "success"]
    assert asked == ["true"]


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        ("Bash(git log:*) Bash(git diff:*)", ["Bash(git log:*)", "Bash(git diff:*)"]),
        ("Bash(npm run test *),Read", ["Bash(npm run test *)", "Read"]),
        ("mcp__github", ["mcp__github"]),
    ],
)
def test_rule_lists_split_outside_parentheses(text: str, rules: list[str]) -> None:
    assert split_rules(text) == rules
