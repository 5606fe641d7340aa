"""A corpus of real configs, each in the shape its tool documents (configs/), run as is.

Claude Code's .mcp.json, Qwen Code's and Gemini CLI's settings.json, Cursor's mcp.json,
Cline's cline_mcp_settings.json and VS Code's mcp.json (``servers``), with each tool's own
keys and interpolation, start real servers over stdio, streamable HTTP and legacy SSE
through the public API. Keys toolbatch does not use only warn, naming the key.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.producers.mcp._support import TEST_SERVER, HttpServer, free_port
from toolbatch import SchedulerConfig, ToolCall, ToolScheduler, Turn, default_registry
from toolbatch._core._wire import FunctionResponsePart

CONFIGS = Path(__file__).resolve().parent / "configs"


@pytest.fixture(scope="module")
def remote() -> Iterator[tuple[HttpServer, HttpServer]]:
    http, sse = HttpServer(port=free_port()), HttpServer(port=free_port(), transport="sse")
    http.start()
    sse.start()
    try:
        yield http, sse
    finally:
        http.stop()
        sse.stop()


def materialize(name: str, tmp_path: Path, remote: tuple[HttpServer, HttpServer]) -> Path:
    """The config with this machine's interpreter, server and URLs filled in."""
    http, sse = remote
    text = (CONFIGS / name).read_text()
    for placeholder, value in {
        "@PYTHON@": sys.executable,
        "@SERVER@": str(TEST_SERVER),
        "@DIR@": str(tmp_path),
        "@HTTP_URL@": http.url,
        "@HTTP_BASE@": http.url.removesuffix("/mcp"),
        "@SSE_URL@": sse.url,
    }.items():
        text = text.replace(placeholder, value)
    (tmp_path / "corpus.env").write_text((CONFIGS / "corpus.env").read_text())
    path = tmp_path / name
    path.write_text(text)
    return path


def output(turn: Turn, call_id: str) -> Any:
    response = next(r for r in turn.responses if r.call_id == call_id)
    part = response.parts[0]
    assert isinstance(part, FunctionResponsePart)
    body = dict(part.function_response.response)
    assert response.status == "success", body
    return body["output"]


# config file -> (servers that answer echo, {server: expected env}, {server: header},
#                 warned keys {server: [...]}, unavailable servers)
CASES: dict[
    str,
    tuple[list[str], dict[str, dict[str, str]], dict[str, str], dict[str, list[str]], list[str]],
] = {
    "claude-code.mcp.json": (
        ["local", "remote", "legacy"],
        {"local": {"TB_MODE": "corpus", "TB_TOKEN": "t0k3n"}},
        {"remote": "claude t0k3n"},
        {},
        [],
    ),
    "qwen-code.settings.json": (
        ["q", "qhttp", "qsse"],
        {"q": {"TB_MODE": "corpus"}},
        {"qhttp": "qwen"},
        {},
        [],
    ),
    "gemini-cli.settings.json": (
        ["g", "ghttp", "gsse"],
        {"g": {"TB_MODE": "corpus"}},
        {"ghttp": "gemini"},
        {"g": ["oauth"]},
        [],
    ),
    "cursor.mcp.json": (
        ["c", "cremote", "csse"],
        {"c": {"TB_MODE": "corpus", "TB_FROM_FILE": "from the env file"}},
        {"cremote": "cursor"},
        {},
        [],
    ),
    "cline_mcp_settings.json": (
        ["cl", "clhttp", "clsse"],
        {"cl": {"TB_MODE": "cline"}},
        {},
        {},
        ["off"],
    ),
    "vscode.mcp.json": (
        ["v", "vhttp", "vfallback"],
        {"v": {"TB_MODE": "corpus", "TB_FROM_FILE": "from the env file", "TB_KEY": "${input:key}"}},
        {"vhttp": "vscode"},
        {"v": ["dev", "sandboxEnabled"]},
        [],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
async def test_each_tools_documented_config_runs_as_is(
    name: str,
    tmp_path: Path,
    remote: tuple[HttpServer, HttpServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every server of the file starts on its transport and answers; env, envFile, headers
    and interpolation arrive; unknown keys warn; disabled servers say so."""
    answering, envs, headers, warned, unavailable = CASES[name]
    monkeypatch.setenv("TB_CORPUS_MODE", "corpus")
    monkeypatch.setenv("TB_CORPUS_TOKEN", "t0k3n")
    monkeypatch.setenv("TB_CORPUS_KEY", "k3y")
    monkeypatch.delenv("TB_CORPUS_BASE", raising=False)
    monkeypatch.chdir(tmp_path)  # VS Code's ${workspaceFolder}
    path = materialize(name, tmp_path, remote)
    calls = [ToolCall(id=f"echo-{s}", name=f"mcp__{s}__echo", args={"text": s}) for s in answering]
    calls += [ToolCall(id=f"env-{s}", name=f"mcp__{s}__env") for s in envs]
    calls += [
        ToolCall(id=f"header-{s}", name=f"mcp__{s}__header", args={"name": "X-Toolbatch-Test"})
        for s in headers
    ]
    calls += [
        ToolCall(id=f"off-{s}", name=f"mcp__{s}__echo", args={"text": "x"}) for s in unavailable
    ]
    with capture_logs() as logs:
        config = SchedulerConfig(mcp_servers=path, artifacts_dir=tmp_path / "artifacts")
        async with ToolScheduler(default_registry(), config) as scheduler:
            assert dict(scheduler.mcp_servers.failures).keys() == set(unavailable)
            turn = await scheduler.run_batch(calls)
    for server in answering:
        assert output(turn, f"echo-{server}") == server
    for server, expected in envs.items():
        env = json.loads(output(turn, f"env-{server}"))
        assert {key: env.get(key) for key in expected} == expected
    for server, value in headers.items():
        assert output(turn, f"header-{server}") == value
    ignored = {
        log["server"]: log["keys"] for log in logs if log["event"] == "mcp.config_key_ignored"
    }
    assert ignored == warned
    for server in unavailable:
        response = next(r for r in turn.responses if r.call_id == f"off-{server}")
        assert response.error_type == "mcp_server_unavailable"
        assert "disabled in the MCP config" in str(response.error)


def test_an_unused_key_is_warned_about_once_per_configuration() -> None:
    """The document is read once, where the config is built: one warning, not one per use."""
    document = {"mcpServers": {"s": {"command": "true", "trust": True, "fancy": 1}}}
    with capture_logs() as logs:
        config = SchedulerConfig(mcp_servers=document)
        config.mcp_config()
        config.mcp_config()
    warned = [entry for entry in logs if entry["event"] == "mcp.config_key_ignored"]
    assert len(warned) == 1
    assert warned[0]["keys"] == ["fancy"]
