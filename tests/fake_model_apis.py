"""Local fake model APIs: real HTTP servers that answer like Chat Completions, Responses or
Anthropic Messages, and record every request they get.

Each fake plays a two-turn loop: while the request holds no tool results it answers with
the scripted tool calls; once it holds them it answers with text. The real SDK clients
(and the examples, in subprocesses) talk to them through ``base_url``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Call",
    "FakeApi",
    "Recorded",
    "anthropic_answer",
    "chat_answer",
    "fake_api",
    "responses_answer",
    "unanswered_chat_calls",
]

Call = tuple[str, str, str]
"""A scripted call: id, tool name, arguments as the model writes them (a JSON string)."""
Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


@dataclass(frozen=True)
class Recorded:
    """One request the fake received (header names in lower case)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    size: int


@dataclass
class FakeApi:
    """A running fake: its base URL and the requests it received, in order."""

    url: str
    requests: list[Recorded] = field(default_factory=list)


@contextmanager
def fake_api(answer: Answer, *, prefix: str = "") -> Iterator[FakeApi]:
    """Serve ``answer`` on a free local port; the URL ends with ``prefix`` (e.g. ``/v1``)."""
    api = FakeApi(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            del format, args

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            body = json.loads(raw)
            headers = {key.lower(): value for key, value in self.headers.items()}
            api.requests.append(Recorded(self.path, headers, body, len(raw)))
            status, reply = answer(body)
            payload = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    api.url = f"http://127.0.0.1:{server.server_address[1]}{prefix}"
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def unanswered_chat_calls(messages: list[dict[str, Any]]) -> list[str]:
    """The ids of assistant tool calls not answered by the tool messages right after them:
    Chat Completions refuses such a request (HTTP 400)."""
    missing: list[str] = []
    for index, message in enumerate(messages):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        answered = set()
        for following in messages[index + 1 :]:
            if following.get("role") != "tool":
                break
            answered.add(following.get("tool_call_id"))
        missing.extend(c["id"] for c in message["tool_calls"] if c["id"] not in answered)
    return missing


def chat_answer(calls: list[Call], *, final: str = "done") -> Answer:
    """Chat Completions: the calls first, then ``final`` and a count of the results.

    A request with an unanswered tool call is refused as the real API does (HTTP 400).
    """

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        missing = unanswered_chat_calls(body["messages"])
        if missing:
            message_text = (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(missing)}"
            )
            return 400, {"error": {"message": message_text, "type": "invalid_request_error"}}
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if results:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": f"{final}: {len(results)} results",
            }
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in calls
                ],
            }
        return 200, {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }

    return answer


def responses_answer(calls: list[Call], *, final: str = "done") -> Answer:
    """Responses: the calls as function_call items first, then a message with ``final``."""

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        results = [i for i in body["input"] if i.get("type") == "function_call_output"]
        if results:
            text = f"{final}: {len(results)} results"
            output: list[dict[str, Any]] = [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ]
        else:
            output = [
                {
                    "type": "function_call",
                    "id": f"fc_{k}",
                    "call_id": i,
                    "name": n,
                    "arguments": a,
                    "status": "completed",
                }
                for k, (i, n, a) in enumerate(calls)
            ]
        return 200, {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": body["model"],
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }

    return answer


def _input(arguments: str) -> object:
    # The API sends an object; a broken proxy might pass the model's text through.
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def anthropic_answer(calls: list[Call], *, final: str = "done") -> Answer:
    """Messages: tool_use blocks first, then a text block with ``final``."""

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        results = [
            block
            for message in body["messages"]
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
            if block["type"] == "tool_result"
        ]
        if results:
            content: list[dict[str, Any]] = [
                {"type": "text", "text": f"{final}: {len(results)} results"}
            ]
            stop = "end_turn"
        else:
            content = [
                {"type": "tool_use", "id": i, "name": n, "input": _input(a)} for i, n, a in calls
            ]
            stop = "tool_use"
        return 200, {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    return answer
