"""The mcpServers document: what loads, and errors that name the server and the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
        pytest.param(
            {"command": "x", "argv": ["a"]}, "argv", "unknown key 'argv'", id="unknown-key"
        ),
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
        pytest.param({"type": "sse", "url": "http://h/sse"}, "type", "SSE", id="sse"),
        pytest.param(
            {"url": "http://h", "env": {"A": "b"}}, "env", "unknown key 'env'", id="http-env"
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
        pytest.param({"servers": {}}, 'no "mcpServers" key', id="missing"),
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


def test_an_unset_variable_without_default_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reference to an unset variable fails at load time, naming it."""
    monkeypatch.delenv("TB_TEST_MISSING", raising=False)
    with pytest.raises(McpConfigError, match=r"TB_TEST_MISSING.*not set") as caught:
        load_mcp_config({"mcpServers": {"s": {"command": "x", "env": {"K": "${TB_TEST_MISSING}"}}}})
    assert (caught.value.server, caught.value.key) == ("s", "env")
