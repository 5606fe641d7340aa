"""``toolbatch tools`` and ``toolbatch artifacts show``, run as a user runs them (the text
listing as a real process, the rest through ``main(argv)``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.cli._support import MCP_TEST_SERVER, invoke_toolbatch, run_toolbatch


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "mcp.json"
    servers = {
        "t": {"command": sys.executable, "args": [str(MCP_TEST_SERVER)]},
        "dead": {"command": "sh", "args": ["-c", "echo 'no token' >&2; exit 3"]},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_tools_lists_every_tool_with_its_source_and_the_servers_that_failed(
    tmp_path: Path,
) -> None:
    """Name, source and description per tool; a server that did not start says why."""
    done = run_toolbatch("tools", "--mcp-config", str(write_config(tmp_path)))
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    rows = {line.split()[0]: line.split(maxsplit=2)[1:] for line in lines if "  " in line}
    assert rows["run_shell_command"][0] == "built-in"
    assert rows["mcp__t__echo"] == ["mcp:t", "Return the text unchanged."]
    assert lines[-1].startswith("MCP server 'dead': failed: ")
    assert "exit code 3" in lines[-1]
    assert "no token" in lines[-1]


def test_tools_json_is_one_object(tmp_path: Path) -> None:
    """--json: the tools and every server's status, for programs."""
    done = invoke_toolbatch("tools", "--json", "--mcp-config", str(write_config(tmp_path)))
    assert done.returncode == 0, done.stderr.decode()
    listing = json.loads(done.stdout)
    tools = {tool["name"]: tool for tool in listing["tools"]}
    assert tools["mcp__t__echo"]["source"] == "mcp:t"
    assert tools["run_shell_command"]["description"]
    servers = {server["name"]: server for server in listing["mcp_servers"]}
    assert servers["t"] == {"name": "t", "status": "connected", "error": None}
    assert servers["dead"]["status"] == "failed"


def test_artifacts_show_a_call_a_session_and_a_path(tmp_path: Path) -> None:
    """A call id prints its complete output; a session id its files; a path the file."""
    batch = [{"id": "bigcall", "name": "run_shell_command", "args": {"command": "seq 1 50000"}}]
    ran = invoke_toolbatch("run", "-", stdin=json.dumps(batch).encode(), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr.decode()
    whole = "".join(f"{n}\n" for n in range(1, 50001))

    call = invoke_toolbatch("artifacts", "show", "bigcall")
    assert call.returncode == 0, call.stderr.decode()
    assert call.stdout.decode() == whole

    listed = invoke_toolbatch("artifacts", "list").stdout.decode().splitlines()
    session_id = listed[1].split()[0]
    session = invoke_toolbatch("artifacts", "show", session_id)
    assert session.returncode == 0, session.stderr.decode()
    header, entry = session.stdout.decode().splitlines()
    assert header.endswith(": 1 file(s)")
    name = entry.split()[0]
    assert name.startswith("run_shell_command-bigcall-")

    path = Path(header.split(":")[0]) / name
    by_path = invoke_toolbatch("artifacts", "show", str(path))
    assert by_path.stdout.decode() == whole

    missing = invoke_toolbatch("artifacts", "show", "no-such-call")
    assert missing.returncode == 1
    assert missing.stdout == b""
    assert "no artifact session, call or file named 'no-such-call'" in missing.stderr.decode()
