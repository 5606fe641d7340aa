"""Messages over LARGE_MESSAGE_BYTES take the stdlib parser on their text (to hold 2x, not
3x, of a 200 MB result): they must decode exactly as small ones do."""

from __future__ import annotations

import json

import pytest
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCResponse

from toolbatch.producers.mcp._stdio import LARGE_MESSAGE_BYTES, decode_message

_PAD = "x" * (LARGE_MESSAGE_BYTES + 10)


def _result(line: bytes) -> object:
    decoded = decode_message(line)
    assert isinstance(decoded, SessionMessage)
    assert isinstance(decoded.message, JSONRPCResponse)
    return decoded.message.result


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain \u00e9 text\n" + _PAD, "plain \u00e9 text\n" + _PAD),
        ("cut pair \ud83d" + _PAD, "cut pair \ufffd" + _PAD),  # sent as \\ud83d, replaced
    ],
)
def test_a_large_message_decodes_like_a_small_one(text: str, expected: str) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": 4, "result": {"t": text}}).encode()
    assert len(line) > LARGE_MESSAGE_BYTES
    assert _result(line) == {"t": expected}


def test_large_broken_utf8_and_broken_envelopes_are_handled_as_for_small_ones() -> None:
    broken = b'{"jsonrpc":"2.0","id":1,"result":{"t":"bad \xff byte ' + _PAD.encode() + b'"}}'
    assert _result(broken) == {"t": "bad \ufffd byte " + _PAD}
    envelope = json.dumps({"jsonrpc": "1.0", "id": "r-9", "result": {"t": _PAD}}).encode()
    decoded = decode_message(envelope)
    assert isinstance(decoded, SessionMessage)
    assert isinstance(decoded.message, JSONRPCError)
    assert decoded.message.id == "r-9"
    assert isinstance(decode_message(b"[" + _PAD.encode() + b"]"), Exception)
