"""--settings (repeatable) and --mcp-startup-timeout on run, serve and acp."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli._support import ECHO_MCP_SERVER, invoke_toolbatch
from toolbatch.cli._options import _parser
from toolbatch.cli._runtime import _scheduler_config


@pytest.mark.parametrize("command", ["run", "serve", "acp"])
def test_settings_files_map_to_the_scheduler_config_in_order(command: str, tmp_path: Path) -> None:
    """Each --settings file is read, merged in order, on every runtime command."""
    user, project = tmp_path / "user.json", tmp_path / "project.json"
    user.write_text(json.dumps({"permissions": {"allow": ["Bash(ls *)"]}}))
    project.write_text(json.dumps({"permissions": {"deny": ["Bash(rm *)"]}}))
    args = _parser().parse_args(
        [command, "--settings", str(user), "--settings", str(project), "--mcp-startup-timeout", "7"]
    )
    config = _scheduler_config(args)
    assert config.loaded_settings.sources == (str(user), str(project))
    assert config.mcp_startup_timeout == 7
    rules = config.loaded_settings.permissions
    assert [r.text for r in rules.allow] == ["Bash(ls *)"]
    assert [r.text for r in rules.deny] == ["Bash(rm *)"]


def test_run_applies_the_settings_headless(tmp_path: Path) -> None:
    """A deny rule, an ask rule (denied headless, the rule named), a PreToolUse hook and an
    MCP server from a Qwen-style settings file, through the command line."""
    hook = tmp_path / "guard.sh"
    hook.write_text(
        "#!/bin/bash\ninput=$(cat)\n"
        "if echo \"$input\" | grep -q secret; then echo 'no secrets' >&2; exit 2; fi\n"
    )
    hook.chmod(0o755)
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "permissions": {"deny": ["Bash(curl *)"], "ask": ["Bash(git push:*)"]},
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Bash", "hooks": [{"type": "command", "command": str(hook)}]}
                    ]
                },
                "mcpServers": {"q": {**ECHO_MCP_SERVER, "trust": True}},
            }
        )
    )
    batch = [
        {"id": "a", "name": "run_shell_command", "args": {"command": "curl http://x"}},
        {"id": "b", "name": "run_shell_command", "args": {"command": "git push origin"}},
        {"id": "c", "name": "run_shell_command", "args": {"command": "cat secret.txt"}},
        {"id": "d", "name": "mcp__q__echo", "args": {"text": "from settings"}},
    ]
    done = invoke_toolbatch(
        "run",
        "--settings",
        str(settings),
        "--output-format",
        "json",
        "--sandbox",
        "off",
        "--artifacts-dir",
        str(tmp_path / "a"),
        stdin=json.dumps(batch).encode(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    events = json.loads(done.stdout)
    parts = json.loads(next(e for e in events if e["type"] == "result")["result"])
    by_id = {p["functionResponse"]["id"]: p["functionResponse"]["response"] for p in parts}
    assert "'Bash(curl *)' (deny" in by_id["a"]["error"]
    assert "'Bash(git push:*)' (ask" in by_id["b"]["error"]
    assert "no approve callback" in by_id["b"]["error"]
    assert "no secrets" in by_id["c"]["error"]
    assert by_id["d"] == {"output": "from settings"}


def test_a_bad_settings_file_is_a_usage_error(tmp_path: Path) -> None:
    """Unreadable, invalid JSON or a wrong rule: exit 2, the file and the fix named."""
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    done = invoke_toolbatch("run", "--settings", str(broken), stdin=b"[]", cwd=tmp_path)
    assert done.returncode == 2
    assert "is not valid JSON" in done.stderr.decode()
    bad_rule = tmp_path / "rule.json"
    bad_rule.write_text(json.dumps({"permissions": {"allow": ["Bash("]}}))
    done = invoke_toolbatch("run", "--settings", str(bad_rule), stdin=b"[]", cwd=tmp_path)
    assert done.returncode == 2
    assert "not a permission rule" in done.stderr.decode()


def test_a_lenient_mcp_config_no_longer_exits_2(tmp_path: Path) -> None:
    """Qwen's trust, Gemini's includeTools, Cursor's envFile, Cline's disabled/alwaysAllow:
    warnings at most, and the batch runs (the issue's first complaint)."""
    config: dict[str, Any] = {"mcpServers": {}}
    config["mcpServers"]["t"] = {
        **ECHO_MCP_SERVER,
        "trust": True,
        "includeTools": ["echo"],
        "alwaysAllow": ["echo"],
        "disabled": False,
        "someFutureKey": 1,
    }
    config["mcpServers"]["off"] = {"command": "nope", "disabled": True}
    path = tmp_path / "lenient.json"
    path.write_text(json.dumps(config))
    batch = [{"id": "e", "name": "mcp__t__echo", "args": {"text": "ok"}}]
    done = invoke_toolbatch(
        "run",
        "--mcp-config",
        str(path),
        "--artifacts-dir",
        str(tmp_path / "a"),
        stdin=json.dumps(batch).encode(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert "someFutureKey" in done.stderr.decode()  # the warning names the key
    assert "ok" in done.stdout.decode()
