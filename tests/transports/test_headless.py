"""Headless output adapters: text, json, stream-json and Dual Output."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from tests.strategies import scaled
from tests.transports.strategies import NODE, js_text, reference_payload_bytes
from toolbatch import (
    InlineData,
    InlineDataPart,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolFailure,
    ToolResult,
)
from toolbatch.errors import ConfigError
from toolbatch.transports import (
    DUAL_OUTPUT_PROTOCOL_VERSION,
    HEADLESS_MARKER,
    HEADLESS_TOOL_RESULT_JSON_BYTES,
    OutputFormat,
    display_text,
    json_string_bytes,
    make_output_adapter,
    tool_result_content,
)

BUDGET = HEADLESS_TOOL_RESULT_JSON_BYTES
BIG_OUTPUT = "".join(f"{i:06d} build step ok\n" for i in range(40_000))[:499_999]


class RecordingStream(io.StringIO):
    """A real text stream that also remembers each ``write`` call."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def lines_of(text: str) -> list[dict[str, Any]]:
    """JSON Lines framed on "\\n" only, as a conforming reader must."""
    assert text.endswith("\n")
    return [json.loads(line) for line in text.split("\n")[:-1]]


def shell_call(call_id: str = "call_1", command: str = "make") -> ToolCall:
    return ToolCall(id=call_id, name="run_shell_command", args={"command": command})


def run_session(
    adapter: Any, responses: list[tuple[ToolCall, ToolCallResponse]], *, answer: str = "done"
) -> None:
    """One headless run: init, the calls and their results, the answer, the result, close."""
    adapter.init("session-1", ["run_shell_command", "read_file"], model="scripted", cwd="/w")
    adapter.assistant_message("Running the build.")
    for call, _ in responses:
        adapter.tool_use(call)
    for call, response in responses:
        adapter.tool_result(call, response)
    adapter.assistant_message(answer)
    adapter.result(num_turns=2, duration_ms=12.5, budget_chars=200_000, budget_used_chars=9_000)
    adapter.close()


def standard_responses(tmp_path: Path) -> list[tuple[ToolCall, ToolCallResponse]]:
    """A huge successful result with a persisted artifact, and a failed call."""
    big_call = shell_call("call_big")
    artifact = tmp_path / "secret-artifact-7f3a.txt"
    artifact.write_text(BIG_OUTPUT)
    big = ToolCallResponse.from_result(
        big_call,
        ToolResult(content="preview", display=BIG_OUTPUT, persisted_output_files=(artifact,)),
    )
    bad_call = shell_call("call_bad", "false")
    bad = ToolCallResponse.failed(bad_call, "command exited with code 1")
    return [(big_call, big), (bad_call, bad)]


def test_stream_json_writes_one_parseable_event_per_line(tmp_path: Path) -> None:
    """init, message, tool_use, tool_result and result, each a line that parses."""
    stream = RecordingStream()
    run_session(make_output_adapter("stream-json", stream), standard_responses(tmp_path))
    events = lines_of(stream.getvalue())
    kinds = [(e["type"], e.get("subtype")) for e in events]
    assert kinds == [
        ("system", "init"),
        ("assistant", None),
        ("assistant", None),
        ("assistant", None),
        ("user", None),
        ("user", None),
        ("assistant", None),
        ("result", "success"),
    ]
    assert all(e["session_id"] == "session-1" for e in events)
    init = events[0]
    assert init["tools"] == ["run_shell_command", "read_file"]
    assert init["model"] == "scripted"
    tool_use = events[2]["message"]["content"][0]
    assert tool_use == {
        "type": "tool_use",
        "id": "call_big",
        "name": "run_shell_command",
        "input": {"command": "make"},
    }
    assert events[2]["message"]["stop_reason"] == "tool_use"
    big, bad = (e["message"]["content"][0] for e in events[4:6])
    assert big["tool_use_id"] == "call_big"
    assert big["is_error"] is False
    assert json_string_bytes(big["content"]) == BUDGET
    assert big["content"].startswith(BIG_OUTPUT[:1000])
    assert big["content"].endswith(BIG_OUTPUT[-1000:])
    assert HEADLESS_MARKER in big["content"]
    assert bad == {
        "type": "tool_result",
        "tool_use_id": "call_bad",
        "content": "command exited with code 1",
        "is_error": True,
    }
    result = events[-1]
    assert result["result"] == "done"
    assert result["is_error"] is False
    assert result["num_turns"] == 2
    assert result["duration_ms"] == 12.5
    assert result["budget"] == {"limit_chars": 200_000, "used_chars": 9_000}
    # Line-atomic: one write per event, each exactly one line.
    assert len(stream.writes) == len(events)
    assert all(w.endswith("\n") and w.count("\n") == 1 for w in stream.writes)
    largest = max(len(w.encode()) for w in stream.writes)
    assert largest < BUDGET + 1024


def test_json_writes_one_document_at_close(tmp_path: Path) -> None:
    """The json format writes nothing until close, then one array of the same events."""
    stream = RecordingStream()
    adapter = make_output_adapter("json", stream)
    responses = standard_responses(tmp_path)
    adapter.init("session-1", ["run_shell_command"])
    adapter.tool_use(responses[0][0])
    adapter.tool_result(*responses[0])
    assert stream.getvalue() == ""
    adapter.result(num_turns=1, result="all good")
    adapter.close()
    adapter.close()
    assert len(stream.writes) == 1
    document = json.loads(stream.getvalue())
    assert [e["type"] for e in document] == ["system", "assistant", "user", "result"]
    assert json_string_bytes(document[2]["message"]["content"][0]["content"]) == BUDGET
    assert document[-1]["result"] == "all good"
    assert len(stream.getvalue().encode()) < BUDGET + 4096


def test_text_writes_only_the_final_answer(tmp_path: Path) -> None:
    """Text output is the answer, whatever the tools printed."""
    stream = RecordingStream()
    run_session(make_output_adapter("text", stream), standard_responses(tmp_path))
    assert stream.getvalue() == "done\n"
    failed = RecordingStream()
    adapter = make_output_adapter("text", failed)
    adapter.init("s", [])
    adapter.result(num_turns=0, is_error=True, error="model unreachable")
    adapter.close()
    assert failed.getvalue() == "Error: model unreachable\n"


@pytest.mark.parametrize(
    ("display", "error", "shown"),
    [
        pytest.param("plain", None, "plain", id="string"),
        pytest.param(
            {"text": "Echo: hi", "structuredContent": {"a": 1}}, None, "Echo: hi", id="mcp"
        ),
        pytest.param(
            {"text": "", "isError": True}, "server failed", "server failed", id="mcp-error"
        ),
        pytest.param({"rows": [1, 2]}, None, '{"rows": [1, 2]}', id="other-object"),
        pytest.param(None, None, "model text", id="none"),
    ],
)
def test_tool_results_show_the_display_text(display: Any, error: str | None, shown: str) -> None:
    """An MCP display shows its text, not its JSON; media follow as one line each."""
    call = shell_call()
    png = base64.b64encode(b"\x89PNG" + b"\x00" * 4029).decode()  # 4,033 bytes: "==" padded
    result = ToolResult(
        content=[
            TextPart(text="model text"),
            InlineDataPart(inline_data=InlineData(mime_type="image/png", data=png)),
        ],
        display=display,
        error=None if error is None else ToolFailure(message=error),
    )
    response = ToolCallResponse.from_result(call, result)
    assert display_text(response) == shown
    assert tool_result_content(response) == f"{shown}\n[image/png image, 4,033 bytes]"


def test_a_rendering_for_people_reaches_only_the_text_output(tmp_path: Path) -> None:
    """result(text=...) is what text shows; json, stream-json and the sidecar carry result."""
    parts = json.dumps([{"text": "what the model receives"}])
    outputs: dict[str, str] = {}
    for output_format in ("text", "json", "stream-json"):
        main = io.StringIO()
        sidecar_path = tmp_path / f"{output_format}.jsonl"
        with sidecar_path.open("w", encoding="utf-8") as sidecar:
            adapter = make_output_adapter(output_format, main, dual_output=sidecar)
            adapter.init("s", [])
            adapter.result(num_turns=1, result=parts, text="== a rendering ==\n")
            adapter.close()
        outputs[output_format] = main.getvalue()
        [result] = [e for e in lines_of(sidecar_path.read_text()) if e["type"] == "result"]
        assert json.loads(result["result"]) == [{"text": "what the model receives"}]
        assert "rendering" not in sidecar_path.read_text()
    assert outputs["text"] == "== a rendering ==\n"
    assert json.loads(outputs["json"])[-1]["result"] == parts
    assert lines_of(outputs["stream-json"])[-1]["result"] == parts


def test_a_failed_run_can_still_carry_its_result() -> None:
    """An interrupted run: error_during_execution, is_error, and the result it still made."""
    stream = io.StringIO()
    adapter = make_output_adapter("stream-json", stream)
    adapter.init("s", [])
    adapter.result(num_turns=1, is_error=True, error="interrupted by SIGINT", result="[]")
    adapter.close()
    [*_, result] = lines_of(stream.getvalue())
    assert result["subtype"] == "error_during_execution"
    assert result["is_error"] is True
    assert result["error"] == {"message": "interrupted by SIGINT"}
    assert result["result"] == "[]"
    text = io.StringIO()
    adapter = make_output_adapter("text", text)
    adapter.init("s", [])
    adapter.result(num_turns=1, is_error=True, error="interrupted", result="[]", text="turn\n")
    adapter.close()
    assert text.getvalue() == "turn\nError: interrupted\n"


def test_text_output_is_writable_utf8_whatever_the_answer_holds(tmp_path: Path) -> None:
    """Lone surrogates become U+FFFD and split halves their character in text output."""
    path = tmp_path / "answer.txt"
    with path.open("w", encoding="utf-8") as stream:
        adapter = make_output_adapter("text", stream)
        adapter.init("s", [])
        adapter.assistant_message("bytes \udcff and \ud83d\ude00")
        adapter.result(num_turns=1)
        adapter.close()
    assert path.read_text(encoding="utf-8") == "bytes \ufffd and \U0001f600\n"


def test_dual_output_mirrors_stream_json_to_a_sidecar_file(tmp_path: Path) -> None:
    """Text on the main stream; the same events, framed by a v2 handshake, in the sidecar."""
    sidecar_path = tmp_path / "events.jsonl"
    main = RecordingStream()
    with sidecar_path.open("w", encoding="utf-8") as sidecar:
        run_session(
            make_output_adapter("text", main, dual_output=sidecar), standard_responses(tmp_path)
        )
        assert not sidecar.closed
    assert main.getvalue() == "done\n"
    events = lines_of(sidecar_path.read_text(encoding="utf-8"))
    start, end = events[0], events[-1]
    assert (start["type"], start["subtype"]) == ("system", "session_start")
    assert start["data"]["protocol_version"] == DUAL_OUTPUT_PROTOCOL_VERSION == 2
    assert start["data"]["session_id"] == "session-1"
    assert (end["type"], end["subtype"]) == ("system", "session_end")
    stream = RecordingStream()
    run_session(make_output_adapter("stream-json", stream), standard_responses(tmp_path))
    mirrored = events[1:-1]
    expected = lines_of(stream.getvalue())
    assert len(mirrored) == len(expected)
    for got, want in zip(mirrored, expected, strict=True):
        got.pop("uuid")
        want.pop("uuid")
        assert got == want
    tool_results = [e for e in events if e["type"] == "user"]
    assert json_string_bytes(tool_results[0]["message"]["content"][0]["content"]) == BUDGET


def test_a_broken_sidecar_is_dropped_and_the_run_carries_on(tmp_path: Path) -> None:
    """A consumer that goes away (EPIPE) disables Dual Output, not the main output."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    main = RecordingStream()
    with open(write_end, "w", encoding="utf-8") as sidecar:
        adapter = make_output_adapter("stream-json", main, dual_output=sidecar)
        run_session(adapter, standard_responses(tmp_path))
        with pytest.raises(BrokenPipeError):
            sidecar.close()
    assert lines_of(main.getvalue())[-1]["type"] == "result"


@pytest.mark.parametrize("output_format", ["text", "json", "stream-json"])
def test_persisted_output_files_never_reach_the_wire(
    output_format: OutputFormat, tmp_path: Path
) -> None:
    """Artifact paths are internal: no format, nor the sidecar, ever shows them."""
    main = RecordingStream()
    sidecar = RecordingStream()
    responses = standard_responses(tmp_path)
    run_session(make_output_adapter(output_format, main, dual_output=sidecar), responses)
    for text in (main.getvalue(), sidecar.getvalue()):
        assert "secret-artifact-7f3a" not in text
        assert "persisted" not in text
        assert str(tmp_path) not in text


def test_the_adapters_never_change_calls_or_responses(tmp_path: Path) -> None:
    """Projection is display-only: model parts, display and artifact metadata stay as they were."""
    responses = standard_responses(tmp_path)
    structured_call = shell_call("call_struct")
    display = {"files": ["a.py", "b.py"], "log": "x" * 100_000}
    structured = ToolCallResponse.from_result(
        structured_call, ToolResult(content="2 files", display=display)
    )
    responses.append((structured_call, structured))
    before = [
        (c.model_dump(), r.model_dump(), r.persisted_output_files, r.parts) for c, r in responses
    ]
    parts_identity = [r.parts for _, r in responses]
    for output_format in ("text", "json", "stream-json"):
        run_session(
            make_output_adapter(output_format, RecordingStream(), dual_output=RecordingStream()),
            responses,
        )
    after = [
        (c.model_dump(), r.model_dump(), r.persisted_output_files, r.parts) for c, r in responses
    ]
    assert after == before
    assert all(a is b for a, b in zip(parts_identity, [r.parts for _, r in responses], strict=True))
    assert responses[0][1].persisted_output_files == (tmp_path / "secret-artifact-7f3a.txt",)
    assert display["log"] == "x" * 100_000


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        pytest.param(
            ToolCallResponse.from_result(
                shell_call(), ToolResult(content="model text", display="shown to user")
            ),
            "shown to user",
            id="display-string",
        ),
        pytest.param(
            ToolCallResponse.from_result(
                shell_call(), ToolResult(content="model text", display={"rows": 2, "ok": True})
            ),
            '{"rows": 2, "ok": true}',
            id="display-json",
        ),
        pytest.param(
            ToolCallResponse.from_result(
                shell_call(), ToolResult.failure("disk full", content="partial")
            ),
            "disk full",
            id="error-without-display",
        ),
        pytest.param(
            ToolCallResponse.from_result(shell_call(), ToolResult(content="model text")),
            "model text",
            id="model-text-fallback",
        ),
        pytest.param(
            ToolCallResponse.from_result(
                shell_call(), ToolResult(content="model text", display="  \n")
            ),
            "model text",
            id="blank-display-falls-back",
        ),
        pytest.param(
            ToolCallResponse.failed(shell_call(), "cancelled by user", status="cancelled"),
            "cancelled by user",
            id="cancelled",
        ),
    ],
)
def test_tool_result_content_is_the_semantic_display_value(
    response: ToolCallResponse, expected: str
) -> None:
    """display first, then its JSON, then the error, then the model-facing text."""
    assert tool_result_content(response) == expected


def test_line_separators_and_surrogates_never_break_the_framing() -> None:
    """U+2028/U+2029 stay raw, lone surrogates are escaped; "\\n" framing holds."""
    tricky = 'a\u2028b\u2029c\udcffd\ud83d\ude00e\n"f\\'
    call = shell_call("call_\u2028")
    response = ToolCallResponse.from_result(call, ToolResult(content=tricky, display=tricky))
    stream = RecordingStream()
    adapter = make_output_adapter("stream-json", stream)
    adapter.init("s\u2029", [])
    adapter.tool_use(call)
    adapter.tool_result(call, response)
    adapter.result(num_turns=1, result=tricky)
    adapter.close()
    text = stream.getvalue()
    text.encode("utf-8")  # writable to any UTF-8 stream: no raw surrogates
    events = lines_of(text)
    assert len(events) == 4
    assert len(text.splitlines()) > 4  # why readers must not use splitlines()
    content = events[2]["message"]["content"][0]["content"]
    assert content == 'a\u2028b\u2029c\udcffd\U0001f600e\n"f\\'
    assert "\\udcff" in text


@settings(max_examples=scaled(40), deadline=None)
@given(js_text)
def test_any_display_text_yields_parseable_bounded_lines(text: str) -> None:
    """Whatever the display holds, each line parses and content stays within budget."""
    call = shell_call()
    display = text * (1 + BUDGET // max(1, len(text))) if text else text
    response = ToolCallResponse.from_result(call, ToolResult(content="x", display=display))
    stream = RecordingStream()
    adapter = make_output_adapter("stream-json", stream)
    adapter.tool_result(call, response)
    adapter.close()
    (event,) = lines_of(stream.getvalue())
    content = event["message"]["content"][0]["content"]
    assert reference_payload_bytes(content) + 2 <= BUDGET


def test_unknown_formats_and_late_events_are_rejected() -> None:
    """Bad formats and events after close raise ConfigError naming the problem."""
    with pytest.raises(ConfigError, match="'yaml'"):
        make_output_adapter("yaml", io.StringIO())  # type: ignore[arg-type]
    adapter = make_output_adapter("stream-json", io.StringIO())
    adapter.close()
    with pytest.raises(ConfigError, match="after close"):
        adapter.assistant_message("too late")


_NODE_READER = r"""
const fs = require('fs');
const text = fs.readFileSync(process.argv[1], 'utf8');
const lines = text.split('\n');
if (lines.pop() !== '') throw new Error('output does not end with a newline');
const sizes = [];
for (const line of lines) {
  const event = JSON.parse(line);
  if (event.type === 'user') {
    sizes.push(Buffer.byteLength(JSON.stringify(event.message.content[0].content), 'utf8'));
  }
}
process.stdout.write(JSON.stringify({events: lines.length, sizes}));
"""


@pytest.mark.skipif(NODE is None, reason="node is not on PATH: JavaScript reader test skipped")
def test_a_javascript_reader_parses_every_line_within_budget(tmp_path: Path) -> None:
    """node reads the stream-json file line by line; each tool_result fits 65,536 bytes."""
    assert NODE is not None
    responses = standard_responses(tmp_path)
    wide_call = shell_call("call_wide")
    wide = 'é漢😀\u2028\udcff"\\\n' * 30_000
    responses.append((wide_call, ToolCallResponse.from_result(wide_call, ToolResult(display=wide))))
    path = tmp_path / "out.jsonl"
    with path.open("w", encoding="utf-8") as stream:
        run_session(make_output_adapter("stream-json", stream), responses)
    done = subprocess.run(
        [NODE, "-e", _NODE_READER, str(path)], capture_output=True, timeout=60, check=True
    )
    answer = json.loads(done.stdout)
    assert answer["events"] == 10
    assert answer["sizes"][0] == BUDGET
    assert all(BUDGET - 6 <= size <= BUDGET for size in (answer["sizes"][0], answer["sizes"][2]))
