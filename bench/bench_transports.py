"""Transport benchmarks: JSON-string byte accounting, bounded projection, frame sizes.

Every row is measured side by side with its comparison in the same run.
"""

from __future__ import annotations

import gc
import io
import json
import random
import time
from collections.abc import Callable
from typing import Any

from bench._report import Row, Target
from toolbatch import ToolCall, ToolCallResponse, ToolResult
from toolbatch.transports import (
    ACP_TOOL_RESULT_JSON_BYTES,
    HEADLESS_TOOL_RESULT_JSON_BYTES,
    dumps_json_line,
    json_string_bytes,
    make_output_adapter,
    project_acp_update,
    project_json_string,
)

AREA = "transports"
MIB = 1 << 20


def _interleaved_best_ms(
    first: Callable[[], object], second: Callable[[], object], *, repeat: int
) -> tuple[float, float]:
    """Best times of two functions timed in alternation, so both see the same machine load."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for function, bucket in ((first, times[0]), (second, times[1])):
            started = time.perf_counter()
            function()
            bucket.append(time.perf_counter() - started)
    return min(times[0]) * 1000, min(times[1]) * 1000


def _ascii_code(size: int) -> str:
    line = 'def handler(event):\n    return {"status": 200, "body": event["path"]}  # ok\t\n'
    return (line * (size // len(line) + 1))[:size]


def _mixed_unicode(size: int) -> str:
    rng = random.Random(42)
    pool = [*'abcdefgh ijk"\\\n\t\x01é漢字😀\u2028', "</script>"]
    pieces = [rng.choice(pool) for _ in range(size // 2)]
    return "".join(pieces)[: size // 2]


def _surrogate_log(size: int) -> str:
    # What surrogateescape decoding of a binary-laced log gives: one lone surrogate per line.
    return "".join(f"line {i} ok\udcff\n" for i in range(size // 12))[:size]


def _byte_rows(quick: bool) -> list[Row]:
    size = 10 * MIB
    repeat = 5 if quick else 11
    rows = []
    cases = [
        ("ASCII code, 10 Mi chars", _ascii_code(size), True),
        ("mixed Unicode + escapes, 5 Mi chars", _mixed_unicode(size), True),
        ("lone surrogates (1 per 12 chars), 10 Mi chars", _surrogate_log(size), False),
    ]
    for label, text, baseline_works in cases:
        if baseline_works:
            baseline_name = "len(json.dumps(s, ensure_ascii=False).encode())"

            def baseline_function(text: str = text) -> int:
                return len(json.dumps(text, ensure_ascii=False).encode())
        else:
            # ensure_ascii=False cannot encode lone surrogates (UnicodeEncodeError); the
            # ASCII-escaped dump can, so it is the comparison (it also counts wrong bytes).
            baseline_name = "len(json.dumps(s).encode()) (ensure_ascii=False raises here)"

            def baseline_function(text: str = text) -> int:
                return len(json.dumps(text).encode())

        ours, baseline = _interleaved_best_ms(
            lambda text=text: json_string_bytes(text), baseline_function, repeat=repeat
        )
        ratio = ours / baseline
        # Surrogates cost a few extra C passes (count them, find pairs); ordinary text must
        # beat the stdlib outright.
        limit = 1.0 if baseline_works else 2.0
        rows.append(
            Row(
                area=AREA,
                name=f"json_string_bytes, {label}",
                value=ours,
                unit="ms",
                baseline=baseline_name,
                baseline_value=baseline,
                ratio=ratio,
                target=f"ratio <= {limit} (ours/stdlib time; ours is exact JS bytes)",
                goal=Target("ratio", "<=", limit),
            )
        )
        del text
    gc.collect()
    return rows


def _projection_rows(quick: bool) -> list[Row]:
    small = _ascii_code(MIB)
    big_size = (100 if quick else 1024) * MIB
    big = small * (big_size // MIB)  # 1 GiB of RAM in a full run, freed below
    small_ms, big_ms = _interleaved_best_ms(
        lambda: project_json_string(small), lambda: project_json_string(big), repeat=300
    )
    projected = json_string_bytes(project_json_string(big))
    big = ""  # frees the big string (the lambda above shares this binding)
    gc.collect()
    label = "100 MiB (quick mode; full run: 1 GiB)" if quick else "1 GiB"
    ratio = big_ms / small_ms
    return [
        Row(
            area=AREA,
            name=f"project_json_string, ASCII {label} -> {projected:,} B",
            value=big_ms,
            unit="ms",
            baseline="project_json_string, 1 MiB",
            baseline_value=small_ms,
            ratio=ratio,
            target="ratio <= 2 (big/1 MiB time: cost bounded by max_bytes)",
            goal=Target("ratio", "<=", 2),
        )
    ]


def _frame_rows() -> list[Row]:
    output = "".join(f"{i:06d} some log line\n" for i in range(23_810))[:499_999]
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_1",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": output}}],
        "rawOutput": output,
    }
    before = len(dumps_json_line({"sessionId": "s", "update": update}).encode())
    started = time.perf_counter()
    projected = project_acp_update(update)
    acp_ms = (time.perf_counter() - started) * 1000
    after = len(dumps_json_line({"sessionId": "s", "update": projected}).encode())
    acp_limit = 2 * ACP_TOOL_RESULT_JSON_BYTES + 1024

    call = ToolCall(id="call_1", name="run_shell_command", args={"command": "make"})
    response = ToolCallResponse.from_result(call, ToolResult(content="preview", display=output))
    stream = io.StringIO()
    with make_output_adapter("stream-json", stream) as adapter:
        adapter.tool_result(call, response)
    event = stream.getvalue()
    bounded_event = len(event.encode())
    unbounded_event = bounded_event - json_string_bytes(
        json.loads(event)["message"]["content"][0]["content"]
    )
    unbounded_event += json_string_bytes(output)
    event_limit = HEADLESS_TOOL_RESULT_JSON_BYTES + 1024
    return [
        Row(
            area=AREA,
            name=f"ACP frame of a 499,999 B result (projection {acp_ms:.2f} ms)",
            value=after,
            unit="B",
            baseline="the same frame unprojected",
            baseline_value=before,
            ratio=after / before,
            target=f"frame <= {acp_limit:,} B (content and rawOutput 65,536 B each)",
            goal=Target("value", "<=", acp_limit),
        ),
        Row(
            area=AREA,
            name="stream-json tool_result event of a 499,999 B display",
            value=bounded_event,
            unit="B",
            baseline="the same event with unbounded content",
            baseline_value=unbounded_event,
            ratio=bounded_event / unbounded_event,
            target=f"event <= {event_limit:,} B (content 65,536 B)",
            goal=Target("value", "<=", event_limit),
        ),
    ]


def run(quick: bool) -> list[Row]:
    """All transport rows; ``quick`` projects a 100 MiB string instead of 1 GiB."""
    return [*_byte_rows(quick), *_projection_rows(quick), *_frame_rows()]
