"""The mcpServers document: what loads, what only warns, and errors that name the server and
the key. The corpus of real configs in each tool's shape is in test_config_corpus.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from toolbatch.errors import McpConfigError
from toolbatch.producers.mcp import HttpServerConfig, StdioServerConfig, load_mcp_config


def test_stdio_and_http_entries_load_in_document_order(tmp_path: Path) -> None:
    """A Claude-Code-style document gives typed entries, in order, from a dict or a file."""
    document = {
        "mcpServers": {
            "files": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/work"],
                "env": {"LOG": "1"},
                "cwd": "/tmp",
                "timeout": 30000,
            },
            "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}},
            "gemini": {"httpUrl": "http://127.0.0.1:9/mcp", "timeout": 1500.5},
        },
        "theme": "dark",
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(document))
    for source in (document, path, str(path)):
        config = load_mcp_config(source)
        assert list(config.servers) == ["files", "remote", "gemini"]
        files, remote, gemini = config.servers.values()
        assert isinstance(files, StdioServerConfig)
        assert files.args == ["-y", "@modelcontextprotocol/server-filesystem", "/work"]
        assert files.env == {"LOG": "1"}
        assert files.cwd == "/tmp"
        assert files.timeout_s == 30.0
        assert isinstance(remote, HttpServerConfig)
        assert remote.headers == {"Authorization": "Bearer x"}
        assert remote.timeout_s is None
        assert isinstance(gemini, HttpServerConfig)
        assert gemini.url == "http://127.0.0.1:9/mcp"
        assert gemini.timeout_s == pytest.approx(1.5005)


@pytest.mark.parametrize(
    ("entry", "key", "words"),
    [
        pytest.param({"args": ["x"]}, "command", "neither 'command'", id="missing-command"),
        pytest.param({"command": ""}, "command", "'command'", id="empty-command"),
        pytest.param({"command": 3}, "command", "'command' is invalid", id="command-int"),
        pytest.param({"command": "x", "args": "a b"}, "args", "'args' is invalid", id="args-str"),
        pytest.param({"command": "x", "env": {"A": 1}}, "env", "'env.A' is invalid", id="env-int"),
        pytest.param(
            {"command": "x", "timeout": -5}, "timeout", "milliseconds", id="negative-timeout"
        ),
        pytest.param(
            {"command": "x", "timeout": "60s"}, "timeout", "milliseconds", id="timeout-str"
        ),
        pytest.param({"url": "ftp://host/mcp"}, "url", "'url' is invalid", id="bad-scheme"),
        pytest.param(
            {"url": "http://h/mcp", "headers": ["a"]}, "headers", "invalid", id="headers-list"
        ),
        pytest.param({"url": "http://h", "command": "x"}, "url", "both", id="url-and-command"),
        pytest.param(
            {"url": "http://h", "httpUrl": "http://h"}, "httpUrl", "keep one", id="2-urls"
        ),
        pytest.param({"type": "sse"}, "url", "no 'url'", id="sse-without-url"),
        pytest.param({"type": "grpc", "url": "http://h"}, "type", "unknown 'type'", id="bad-type"),
        pytest.param(
            {"command": "x", "includeTools": "echo"}, "includeTools", "list", id="include-str"
        ),
        pytest.param(
            {"command": "x", "startup_timeout_sec": 0}, "startup_timeout_sec", "positive", id="st0"
        ),
    ],
)
def test_a_bad_entry_names_the_server_and_the_key(
    entry: dict[str, Any], key: str, words: str
) -> None:
    """Missing command, unknown keys and bad types fail with the server and key named."""
    with pytest.raises(McpConfigError) as caught:
        load_mcp_config({"mcpServers": {"good": {"command": "ok"}, "broken": entry}})
    assert caught.value.server == "broken"
    assert caught.value.key == key
    assert "'broken'" in str(caught.value)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("document", "words"),
    [
        pytest.param({"server": {}}, 'no "mcpServers" key', id="missing"),
        pytest.param({"mcpservers": {}}, "case-sensitive", id="wrong-case"),
        pytest.param({"mcpServers": ["a"]}, "must be an object", id="list"),
        pytest.param({"mcpServers": {"a": "npx x"}}, "must be an object", id="entry-str"),
        pytest.param({"mcpServers": {"  ": {"command": "x"}}}, "non-empty", id="blank-name"),
    ],
)
def test_a_bad_document_says_what_shape_is_expected(document: Any, words: str) -> None:
    """A document without a usable mcpServers object is rejected with the expected shape."""
    with pytest.raises(McpConfigError, match=words):
        load_mcp_config(document)


def test_unreadable_and_invalid_files_are_config_errors(tmp_path: Path) -> None:
    """A missing file or broken JSON is an McpConfigError naming the file."""
    with pytest.raises(McpConfigError, match="cannot read"):
        load_mcp_config(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {')
    with pytest.raises(McpConfigError, match="not valid JSON"):
        load_mcp_config(broken)


def test_variables_are_expanded_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """${VAR} and ${VAR:-default} are how a secret reaches a server that inherits no env."""
    monkeypatch.setenv("TB_TEST_TOKEN", "s3cret")
    monkeypatch.delenv("TB_TEST_UNSET", raising=False)
    config = load_mcp_config(
        {
            "mcpServers": {
                "s": {
                    "command": "run-${TB_TEST_TOKEN}",
                    "args": ["--level=${TB_TEST_UNSET:-info}", "$PLAIN"],
                    "env": {"TOKEN": "${TB_TEST_TOKEN}"},
                },
                "h": {
                    "url": "https://h/${TB_TEST_UNSET:-v1}",
                    "headers": {"Authorization": "Bearer ${TB_TEST_TOKEN}"},
                },
            }
        }
    )
    stdio, http = config.servers.values()
    assert isinstance(stdio, StdioServerConfig)
    assert stdio.command == "run-s3cret"
    assert stdio.args == ["--level=info", "$PLAIN"]
    assert stdio.env == {"TOKEN": "s3cret"}
    assert isinstance(http, HttpServerConfig)
    assert http.url == "https://h/v1"
    assert http.headers == {"Authorization": "Bearer s3cret"}


def test_an_unset_variable_without_default_stays_and_warns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Claude Code's rule: an unset ${VAR} with no default stays as written, with a warning."""
    monkeypatch.delenv("TB_TEST_MISSING", raising=False)
    with capture_logs() as logs:
        config = load_mcp_config(
            {"mcpServers": {"s": {"command": "x", "env": {"K": "${TB_TEST_MISSING}"}}}}
        )
    entry = config.servers["s"]
    assert isinstance(entry, StdioServerConfig)
    assert entry.env == {"K": "${TB_TEST_MISSING}"}
    [warning] = [log for log in logs if log["event"] == "mcp.variable_unset"]
    assert (warning["server"], warning["key"], warning["variable"]) == (
        "s",
        "env",
        "TB_TEST_MISSING",
    )


def test_unknown_and_unsupported_keys_warn_naming_each_key_and_the_server_loads() -> None:
    """One stray key never rejects a document: the others load, the warning names the key."""
    document = {
        "mcpServers": {
            "a": {"command": "x", "argv": ["a"], "oauth": {"enabled": True}},
            "b": {"url": "http://h/mcp", "env": {"A": "b"}, "alwaysLoad": True},
            "c": {"command": "y"},
        }
    }
    with capture_logs() as logs:
        config = load_mcp_config(document)
    assert list(config.servers) == ["a", "b", "c"]
    ignored = {
        log["server"]: log["keys"] for log in logs if log["event"] == "mcp.config_key_ignored"
    }
    assert ignored == {"a": ["argv", "oauth"], "b": ["alwaysLoad", "env"]}
    assert all(log["log_level"] == "warning" for log in logs if "keys" in log)


def test_disabled_and_unsupported_servers_are_kept_aside_with_the_reason() -> None:
    """disabled / enabled=false / ws servers are not started; the reason is kept for calls."""
    config = load_mcp_config(
        {
            "mcpServers": {
                "off": {"command": "x", "disabled": True},
                "codex_off": {"command": "x", "enabled": False},
                "socket": {"type": "ws", "url": "ws://h/mcp"},
                "on": {"command": "x", "disabled": False},
            }
        }
    )
    assert list(config.servers) == ["on"]
    assert set(config.unavailable) == {"off", "codex_off", "socket"}
    assert "disabled" in config.unavailable["off"]
    assert "'ws' transport" in config.unavailable["socket"]


@pytest.mark.parametrize(
    ("entry", "transport"),
    [
        pytest.param({"url": "http://h/mcp"}, "auto", id="bare-url"),
        pytest.param({"httpUrl": "http://h/mcp"}, "streamable-http", id="gemini-httpUrl"),
        pytest.param({"serverUrl": "http://h/mcp"}, "auto", id="serverUrl"),
        pytest.param({"type": "http", "url": "http://h/mcp"}, "streamable-http", id="claude-http"),
        pytest.param({"type": "streamableHttp", "url": "http://h"}, "streamable-http", id="cline"),
        pytest.param({"transportType": "sse", "url": "http://h"}, "sse", id="cline-legacy"),
        pytest.param({"type": "sse", "url": "http://h/sse"}, "sse", id="sse"),
        pytest.param({"type": "streamable-http", "url": "http://h"}, "streamable-http", id="dash"),
    ],
)
def test_each_agents_http_spelling_picks_its_transport(
    entry: dict[str, Any], transport: str
) -> None:
    """url / httpUrl / serverUrl and every documented type spelling."""
    config = load_mcp_config({"mcpServers": {"s": entry}})
    server = config.servers["s"]
    assert isinstance(server, HttpServerConfig)
    assert server.transport == transport


def test_vscode_servers_shape_and_its_http_fallback() -> None:
    """VS Code's {"servers": ...}; its type "http" falls back to SSE (auto)."""
    config = load_mcp_config(
        {
            "inputs": [],
            "servers": {
                "r": {"type": "http", "url": "http://h/mcp"},
                "s": {"type": "stdio", "command": "x", "envFile": "${workspaceFolder}/.env"},
            },
        }
    )
    remote, local = config.servers.values()
    assert isinstance(remote, HttpServerConfig)
    assert remote.transport == "auto"
    assert isinstance(local, StdioServerConfig)
    assert local.env_file is not None
    assert local.env_file.endswith("/.env")
    assert "${" not in local.env_file


def test_filters_trust_and_timeouts_are_read_from_every_spelling() -> None:
    """includeTools/excludeTools (exclude wins), enabled_tools, alwaysAllow/autoApprove, trust,
    startup_timeout_sec/_ms, discoveryTimeoutMs, tool_timeout_sec; timeouts < 1 s ignored."""
    with capture_logs() as logs:
        config = load_mcp_config(
            {
                "mcpServers": {
                    "g": {
                        "command": "x",
                        "includeTools": ["echo", "pid", "run(args)"],
                        "excludeTools": ["pid"],
                        "trust": True,
                        "startup_timeout_sec": 2.5,
                    },
                    "cx": {"command": "x", "enabled_tools": ["a"], "tool_timeout_sec": 9},
                    "cl": {"command": "x", "autoApprove": ["echo"], "timeout": 60},
                    "q": {"command": "x", "discoveryTimeoutMs": 1500, "alwaysAllow": ["e"]},
                }
            }
        )
    g, cx, cl, q = config.servers.values()
    assert [g.offers(t) for t in ("echo", "pid", "run", "other")] == [True, False, True, False]
    assert g.auto_approves("anything")
    assert g.startup_timeout_s == 2.5
    assert cx.offers("a")
    assert not cx.offers("b")
    assert cx.timeout_s == 9
    assert cl.auto_approves("echo")
    assert not cl.auto_approves("pid")
    assert cl.timeout is None  # Cline's 60 (seconds) is under Claude Code's 1000 ms floor
    assert [log["server"] for log in logs if log["event"] == "mcp.timeout_ignored"] == ["cl"]
    assert q.startup_timeout_s == 1.5
    assert q.auto_approves("e")


def test_codex_config_toml_is_read_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Codex's [mcp_servers.NAME] tables: stdio with env_vars, streamable HTTP with a bearer
    token variable and headers; enabled = false keeps a server aside, required has no effect."""
    monkeypatch.setenv("FIGMA_TOKEN", "tok")
    monkeypatch.setenv("K2", "two")
    monkeypatch.setenv("TEAM", "core")
    path = tmp_path / "config.toml"
    path.write_text(
        'model = "o4"\n'
        "[mcp_servers.docs]\n"
        'command = "docs-server"\nargs = ["--port", "4000"]\nenv = { K = "v" }\n'
        'env_vars = ["K2"]\ncwd = "/srv"\nstartup_timeout_sec = 20\ntool_timeout_sec = 30\n'
        'required = true\nenabled_tools = ["search"]\n'
        "[mcp_servers.figma]\n"
        'url = "https://mcp.figma.com/mcp"\nbearer_token_env_var = "FIGMA_TOKEN"\n'
        'http_headers = { X = "y" }\nenv_http_headers = { X-Team = "TEAM" }\n'
        '[mcp_servers.off]\ncommand = "x"\nenabled = false\n'
    )
    config = load_mcp_config(path)
    docs = config.servers["docs"]
    assert isinstance(docs, StdioServerConfig)
    assert docs.args == ["--port", "4000"]
    assert docs.env == {"K": "v", "K2": "two"}
    assert docs.startup_timeout_s == 20
    assert docs.timeout_s == 30
    assert docs.include_tools == ("search",)
    figma = config.servers["figma"]
    assert isinstance(figma, HttpServerConfig)
    assert figma.transport == "streamable-http"
    assert figma.headers == {"X": "y", "X-Team": "core", "Authorization": "Bearer tok"}
    assert "off" in config.unavailable


def test_a_json_string_is_the_document_itself() -> None:
    """Claude Code's --mcp-config takes the JSON itself."""
    config = load_mcp_config('{"mcpServers": {"s": {"command": "srv"}}}')
    assert list(config.servers) == ["s"]
