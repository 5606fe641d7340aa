"""The stdio transport's line codec, tool naming and server environment: pure invariants."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, strategies as st
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

from tests.strategies import texts
from toolbatch.producers.mcp import (
    DEFAULT_INHERITED_ENV_VARS,
    MAX_TOOL_NAME_CHARS,
    mcp_tool_name,
    scrub_surrogates,
    server_environment,
)
from toolbatch.producers.mcp._stdio import decode_message, encode_message

LONE = re.compile("[\ud800-\udfff]")


@given(texts())
def test_scrubbed_text_is_utf8_and_otherwise_unchanged(text: str) -> None:
    """Scrubbing replaces exactly the lone surrogates, one for one, with U+FFFD."""
    scrubbed = scrub_surrogates(text)
    scrubbed.encode("utf-8")
    assert len(scrubbed) == len(text)
    assert scrubbed == LONE.sub("\ufffd", text)
    if not LONE.search(text):
        assert scrubbed is text


@given(texts(max_repeat=20), st.text(max_size=10))
def test_any_outgoing_message_encodes_to_one_utf8_line(text: str, key: str) -> None:
    """Arguments holding lone surrogates still make a valid JSON line, never an exception."""
    request = JSONRPCRequest(
        jsonrpc="2.0",
        id=7,
        method="tools/call",
        params={"name": "echo", "arguments": {"text": text, key: [text]}},
    )
    line = encode_message(request)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    decoded = json.loads(line.decode("utf-8"))
    arguments = decoded["params"]["arguments"]
    assert arguments["text"] == scrub_surrogates(text)
    assert arguments[scrub_surrogates(key)] == [scrub_surrogates(text)]


@given(texts(max_repeat=20))
def test_an_incoming_line_as_javascript_writes_it_decodes(text: str) -> None:
    """JSON.stringify's escapes for lone surrogates decode, with U+FFFD in their place."""
    # ensure_ascii escapes every non-ASCII code point, lone surrogates as \udXXX: the
    # same bytes a TypeScript server sends for a string it cut inside a pair. An escaped
    # high+low pair on the wire is one astral character, as JavaScript reads it.
    document = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": text}]}}
    line = json.dumps(document).encode()
    decoded = decode_message(line)
    assert isinstance(decoded, SessionMessage)
    assert isinstance(decoded.message, JSONRPCResponse)
    as_javascript_reads_it = json.loads(line)["result"]["content"][0]["text"]
    assert decoded.message.result["content"][0]["text"] == scrub_surrogates(as_javascript_reads_it)


def test_broken_utf8_decodes_with_replacement_characters() -> None:
    """Invalid UTF-8 bytes from a server become U+FFFD instead of a dropped message."""
    line = b'{"jsonrpc":"2.0","id":1,"result":{"t":"bad \xff\xfe byte"}}'
    decoded = decode_message(line)
    assert isinstance(decoded, SessionMessage)
    assert isinstance(decoded.message, JSONRPCResponse)
    assert decoded.message.result == {"t": "bad \ufffd\ufffd byte"}


def test_a_response_with_a_broken_envelope_answers_its_request() -> None:
    """An invalid response with a usable id becomes an error for that id, not a hang."""
    decoded = decode_message(b'{"jsonrpc":"1.0","id":"r-9","result":{}}')
    assert isinstance(decoded, SessionMessage)
    assert isinstance(decoded.message, JSONRPCError)
    assert decoded.message.id == "r-9"
    assert "invalid JSON-RPC response" in decoded.message.error.message


@pytest.mark.parametrize(
    "line", [b"not json", b'{"jsonrpc":"2.0"}', b"[1, 2]", b'{"jsonrpc":"1.0","method":"x"}']
)
def test_garbage_is_returned_as_an_exception(line: bytes) -> None:
    """A line that is no message is handed to the session as an exception, never raised."""
    assert isinstance(decode_message(line), Exception)


@given(st.text(min_size=1, max_size=80), st.text(min_size=1, max_size=200))
def test_exposed_tool_names_are_valid_function_names(server: str, tool: str) -> None:
    """Every exposed name fits model APIs: [A-Za-z0-9_-], at most 64 characters."""
    name = mcp_tool_name(server, tool)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name)
    assert name.startswith("mcp__")
    assert len(name) <= MAX_TOOL_NAME_CHARS


def test_short_names_are_kept_readable_and_long_ones_stay_distinct() -> None:
    """mcp__<server>__<tool>, with unsafe characters replaced; long names keep a digest."""
    assert mcp_tool_name("files", "read_file") == "mcp__files__read_file"
    assert mcp_tool_name("my server", "get.thing") == "mcp__my_server__get_thing"
    first = mcp_tool_name("s", "x" * 100 + "a")
    second = mcp_tool_name("s", "x" * 100 + "b")
    assert first != second
    assert len(first) == len(second) == MAX_TOOL_NAME_CHARS


def test_servers_inherit_only_the_documented_variables() -> None:
    """Secrets in the agent's environment stay out; defaults and the entry's env go in."""
    agent_env = {
        "PATH": "/usr/bin",
        "HOME": "/home/a",
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": "sk-secret",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "BASH_FUNC_x%%": "() { echo; }",
        "SHELL": "() { evil; }",
    }
    env = server_environment({"TOKEN": "given", "PATH": "/opt/bin"}, inherited=agent_env)
    assert env == {"HOME": "/home/a", "LANG": "C.UTF-8", "TOKEN": "given", "PATH": "/opt/bin"}
    assert set(env) - {"TOKEN"} <= set(DEFAULT_INHERITED_ENV_VARS)
