"""``toolbatch acp`` driven from node by the official TypeScript SDK, ``@agentclientprotocol/sdk``.

The SDK validates every message against the ACP schema and refuses frames over 256 KiB
(``sdk_client.mjs``), so a malformed update or an unbounded frame fails this test. The SDK
is installed once with npm into a cache directory outside the repository and reused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from toolbatch.transports import ACP_MARKER, ACP_TOOL_RESULT_JSON_BYTES, json_string_bytes

from ._support import agent_command, processes_running

SDK_PACKAGE = "@agentclientprotocol/sdk"
SDK_VERSION = "2.4.0"
CLIENT = Path(__file__).with_name("sdk_client.mjs")
NPM_TIMEOUT_S = 100
CLIENT_TIMEOUT_S = 100
_NETWORK_ERRORS = re.compile(
    r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|"
    r"network|proxy|getaddrinfo",
    re.IGNORECASE,
)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolbatch-tests" / "acp-sdk" / SDK_VERSION


def _installed(directory: Path) -> bool:
    manifest = directory / "node_modules" / SDK_PACKAGE / "package.json"
    try:
        return json.loads(manifest.read_text())["version"] == SDK_VERSION
    except (OSError, ValueError, KeyError):
        return False


@pytest.fixture(scope="module")
def sdk_dir() -> Path:
    """The SDK installed in the cache (installed now if missing); skips without node/npm."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: the TypeScript SDK test needs node and npm")
    target = _cache_dir()
    if _installed(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="install-", dir=target.parent))
    (staging / "package.json").write_text('{"name": "toolbatch-acp-tests", "private": true}')
    try:
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", f"{SDK_PACKAGE}@{SDK_VERSION}"],
            cwd=staging,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(staging, ignore_errors=True)
        pytest.skip(f"npm install {SDK_PACKAGE} took over {NPM_TIMEOUT_S} s (no network?)")
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        if _NETWORK_ERRORS.search(done.stderr):
            pytest.skip(f"cannot download {SDK_PACKAGE} (no network): {done.stderr[-300:]}")
        pytest.fail(f"npm install {SDK_PACKAGE}@{SDK_VERSION} failed:\n{done.stderr[-2000:]}")
    try:
        staging.rename(target)  # atomic: a concurrent run either sees it whole or not at all
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not _installed(target):
            raise
    return target


def _text(update: dict[str, Any]) -> str:
    (block,) = update["content"]
    text: str = block["content"]["text"]
    return text


def test_the_typescript_sdk_drives_prompts_permission_and_cancel(
    sdk_dir: Path, tmp_path: Path
) -> None:
    """Initialize, new session, a large batch, a rejected command, a cancelled sleep."""
    command = agent_command("--transcript-dir", str(tmp_path / "transcripts"))
    with (tmp_path / "agent.log").open("w") as log:
        done = subprocess.run(
            ["node", str(CLIENT), str(sdk_dir), str(tmp_path), "--", *command],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            timeout=CLIENT_TIMEOUT_S,
            check=False,
        )
    logs = (tmp_path / "agent.log").read_text()[-4000:]
    assert done.returncode == 0, f"the node client failed:\n{logs}"
    seen = json.loads(done.stdout)

    assert seen["agentExitCode"] == 0, logs
    assert seen["init"]["protocolVersion"] == 1
    assert seen["init"]["agentCapabilities"]["loadSession"] is True
    assert seen["stops"] == ["end_turn", "end_turn", "cancelled"]

    updates = seen["updates"]
    started = {u["toolCallId"]: u for u in updates if u["sessionUpdate"] == "tool_call"}
    commands = [u["rawInput"]["command"] for u in started.values()]
    assert commands == [
        "seq 1 400000",
        "python3 -c \"print('漢' * 24000)\"",
        "echo hello-sdk",
        "touch rejected.txt",
        "sleep 3129",
    ]
    ends = {
        u["toolCallId"]: u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
    }
    seq, han, hello, rejected, sleep = (ends[tool_call_id] for tool_call_id in started)
    assert [seq["status"], han["status"], hello["status"]] == ["completed"] * 3
    assert "400000\n" in _text(seq)
    assert ACP_MARKER in _text(han)
    assert json_string_bytes(_text(han)) <= ACP_TOOL_RESULT_JSON_BYTES
    assert json_string_bytes(han["rawOutput"]) <= ACP_TOOL_RESULT_JSON_BYTES
    assert _text(hello).startswith("hello-sdk\n")

    assert [p["toolCall"]["rawInput"]["command"] for p in seen["permissions"]] == commands
    assert rejected["status"] == "failed"
    assert "did not allow" in _text(rejected)
    assert not (tmp_path / "rejected.txt").exists()

    assert sleep["status"] == "failed"
    assert "cancelled" in _text(sleep)
    assert processes_running(["sleep", "3129"]) == []
