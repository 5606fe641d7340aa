"""The stdio transport's writer to the server's stdin, against real processes: what is sent
arrives whole and in order (written at once or by the pump), a server that stops reading
fails the sends and never hangs them."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCNotification, JSONRPCRequest

from tests.strategies import scaled
from toolbatch.producers.mcp import StdioServerConfig, open_stdio_transport

# ``cat`` answers every line with itself: the messages sent come back as the server's output.
CAT = StdioServerConfig(command="cat")
WAIT_S = 10.0


def _request(index: int, text: str) -> SessionMessage:
    return SessionMessage(
        JSONRPCRequest(
            jsonrpc="2.0",
            id=index,
            method="tools/call",
            params={"name": "echo", "arguments": {"text": text}},
        )
    )


async def _echoed(messages: list[SessionMessage], pause_every: int) -> list[object]:
    """What ``cat`` sends back for ``messages``, sent in bursts of ``pause_every`` with a turn
    of the event loop between bursts (the pump finds the queue full, then empty)."""
    async with open_stdio_transport(CAT, server="cat") as transport:
        for index, message in enumerate(messages):
            await transport.write_stream.send(message)
            if index % pause_every == pause_every - 1:
                await anyio.lowlevel.checkpoint()
        received: list[object] = []
        with anyio.fail_after(WAIT_S):
            while len(received) < len(messages):
                item = await transport.read_stream.receive()
                assert isinstance(item, SessionMessage), item
                received.append(item.message)
    return received


@settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(
        st.one_of(
            st.text(max_size=40),
            # More than the pipe holds (64 KiB): written in pieces, partly by the pump.
            st.integers(60_000, 200_000).map(lambda n: "x" * n),
        ),
        min_size=1,
        max_size=30,
    ),
    burst=st.integers(1, 8),
)
def test_messages_reach_the_server_whole_and_in_the_order_sent(
    texts: list[str], burst: int
) -> None:
    """However sends, partial writes and the pump's turns interleave, the server reads each
    message once, in order, byte for byte."""
    messages = [_request(index, text) for index, text in enumerate(texts)]
    received = anyio.run(_echoed, messages, burst)
    assert received == [message.message for message in messages]


async def test_a_send_after_the_transport_closed_is_refused() -> None:
    """Leaving the transport closes the queue: a late send raises, it is not dropped."""
    async with open_stdio_transport(CAT, server="cat") as transport:
        queue = transport.write_stream
    with pytest.raises(anyio.ClosedResourceError):
        await queue.send(_request(1, "late"))


async def test_a_server_that_stops_reading_its_stdin_fails_sends_and_says_why() -> None:
    """A server that closed its stdin: the write fails, the output stream ends (so calls in
    flight are answered), the reason names stdin, and later sends raise at once."""
    # Closes its stdin, then waits (bounded) without reading.
    closes_stdin = StdioServerConfig(command="sh", args=["-c", "exec 0<&-; sleep 20"])
    async with open_stdio_transport(closes_stdin, server="deaf") as transport:
        with anyio.fail_after(WAIT_S):
            # The first write may fit in the pipe before the server's close is seen; later
            # ones fail on the closed pipe.
            while not transport.closed.is_set():
                try:
                    await transport.write_stream.send(_request(1, "x" * 1000))
                except anyio.BrokenResourceError:
                    break
                await anyio.sleep(0.01)
            await transport.closed.wait()
            with pytest.raises(anyio.EndOfStream):
                await transport.read_stream.receive()
        assert transport.close_reason is not None
        assert "stopped reading its stdin" in transport.close_reason
        with pytest.raises(anyio.BrokenResourceError):
            await transport.write_stream.send(_request(2, "after"))


async def test_requests_and_notifications_arrive_in_the_order_sent() -> None:
    """A request, a notification sent in the same turn and a request sent later reach the
    server in that order (the session's ``initialize``, then its notification)."""
    note = SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
    async with open_stdio_transport(CAT, server="cat") as transport:
        await transport.write_stream.send(_request(1, "first"))
        await transport.write_stream.send(note)
        await anyio.sleep(0.01)
        await transport.write_stream.send(_request(2, "last"))
        with anyio.fail_after(WAIT_S):
            got = [(await transport.read_stream.receive()) for _ in range(3)]
    assert [item.message for item in got if isinstance(item, SessionMessage)] == [
        _request(1, "first").message,
        note.message,
        _request(2, "last").message,
    ]


async def test_a_send_never_waits_for_a_server_that_does_not_read() -> None:
    """Megabytes to a server that never reads its stdin: every send returns at once (what
    the pipe cannot take waits in order for the pump), and leaving still stops it."""
    deaf = StdioServerConfig(command="sh", args=["-c", "sleep 20"])
    async with open_stdio_transport(deaf, server="deaf") as transport:
        with anyio.fail_after(WAIT_S):
            for index in range(20):
                await transport.write_stream.send(_request(index, "y" * 100_000))
        assert not transport.closed.is_set()
    assert transport.returncode is not None
