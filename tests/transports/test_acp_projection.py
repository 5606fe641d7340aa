"""The ACP display projection of ``tool_call_update`` notifications."""

from __future__ import annotations

import copy
import json
from typing import Any

import acp
import pytest
from hypothesis import given, settings, strategies as st

from tests.strategies import scaled
from tests.transports.strategies import js_text, reference_payload_bytes
from toolbatch.transports import (
    ACP_MARKER,
    ACP_MEDIA_JSON_BYTES,
    ACP_TOOL_RESULT_JSON_BYTES,
    dumps_json_line,
    project_acp_update,
)

BUDGET = ACP_TOOL_RESULT_JSON_BYTES
MARKER_PAYLOAD = reference_payload_bytes(ACP_MARKER)


def block(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def update(content: Any = None, raw_output: Any = None, **extra: Any) -> dict[str, Any]:
    """A ``tool_call_update`` as it goes on the wire."""
    value: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call_1",
        "status": "completed",
    }
    if content is not None:
        value["content"] = content
    if raw_output is not None:
        value["rawOutput"] = raw_output
    value.update(extra)
    return value


def json_bytes(value: Any) -> int:
    """UTF-8 bytes of ``JSON.stringify(value)`` (dumps_json_line matches node)."""
    return len(dumps_json_line(value).encode("utf-8"))


def texts(value: dict[str, Any]) -> list[str]:
    return [item["content"]["text"] for item in value["content"]]


def media(data: str, mime_type: str = "image/png", kind: str = "image") -> dict[str, Any]:
    return {"type": "content", "content": {"type": kind, "data": data, "mimeType": mime_type}}


def test_small_updates_come_back_as_the_same_object() -> None:
    """Everything within budget is returned untouched, identity included."""
    small = update([block("hello"), block("world")], raw_output="hello")
    assert project_acp_update(small) is small
    empty = update([])
    assert project_acp_update(empty) is empty


@pytest.mark.parametrize(
    "kind", ["tool_call", "agent_message_chunk", "plan", "user_message_chunk", None]
)
def test_only_tool_call_updates_are_projected(kind: str | None) -> None:
    """Other session updates, even huge ones, are left alone."""
    huge = update([block("x" * 200_000)], raw_output="y" * 200_000)
    huge["sessionUpdate"] = kind
    assert project_acp_update(huge) is huge


def test_a_large_single_block_shares_its_projection_with_equal_raw_output() -> None:
    """The 499,999-byte result of the Qwen repro: content and rawOutput bounded, identical."""
    output = "".join(f"{i:06d} some log line\n" for i in range(23_810))[:499_999]
    original = update([block(output)], raw_output=output, status="in_progress")
    snapshot = copy.deepcopy(original)
    projected = project_acp_update(original)
    assert original == snapshot
    assert json_bytes(projected["content"]) <= BUDGET
    assert json_bytes(projected["rawOutput"]) <= BUDGET
    assert projected["rawOutput"] is texts(projected)[0]
    assert ACP_MARKER in projected["rawOutput"]
    assert output.endswith(projected["rawOutput"].split(ACP_MARKER)[1])
    assert projected["status"] == "in_progress"
    notification = {"sessionId": "s1", "update": projected}
    assert json_bytes(notification) < 2 * BUDGET + 1024


def test_raw_output_is_bounded_on_its_own_when_it_differs() -> None:
    """A string rawOutput that is not the block's text gets its own 65,536 bytes."""
    original = update([block("short")], raw_output="r" * 100_000)
    projected = project_acp_update(original)
    assert projected["content"] is original["content"]
    assert json_bytes(projected["rawOutput"]) == BUDGET
    structured = update([block("short")], raw_output={"exit_code": 0, "stdout": "s" * 100_000})
    assert project_acp_update(structured) is structured


def test_many_blocks_share_the_budget_max_min() -> None:
    """Small blocks stay whole and identical; the long ones split what is left evenly."""
    small = [block("ok"), block("fine " * 10)]
    large = [block("L" * 90_000), block("M" * 30_000), block("N" * 200_000)]
    original = update([small[0], large[0], small[1], large[1], large[2]])
    projected = project_acp_update(original)
    result = projected["content"]
    assert json_bytes(result) == BUDGET
    assert result[0] is small[0]
    assert result[2] is small[1]
    sizes = [reference_payload_bytes(t) for t in texts(projected)]
    assert max(sizes[1], sizes[3], sizes[4]) - min(sizes[1], sizes[3], sizes[4]) <= 1
    for index in (1, 3, 4):
        assert ACP_MARKER in texts(projected)[index]


@settings(max_examples=scaled(120), deadline=None)
@given(
    st.lists(
        st.one_of(
            js_text,
            st.integers(min_value=0, max_value=40_000).map(lambda n: "a" * n),
            st.tuples(st.integers(0, 30_000), js_text).map(lambda t: "b" * t[0] + t[1]),
        ),
        max_size=12,
    )
)
def test_content_projection_invariants(block_texts: list[str]) -> None:
    """Never over budget; unchanged means identical; whole blocks are never larger than
    the largest preview plus one byte; each preview is a head and tail of its block."""
    original = update([block(t) for t in block_texts])
    snapshot = copy.deepcopy(original)
    projected = project_acp_update(original)
    assert original == snapshot
    assert json_bytes(projected["content"]) <= BUDGET
    if json_bytes(original["content"]) <= BUDGET:
        assert projected is original
        return
    assert project_acp_update(projected) is projected
    kept, previews = [], []
    for source, item in zip(block_texts, projected["content"], strict=True):
        text = item["content"]["text"]
        if text == source:
            kept.append(reference_payload_bytes(text))
        else:
            head, _, tail = text.partition(ACP_MARKER)
            assert source.startswith(head)
            assert source.endswith(tail)
            previews.append(reference_payload_bytes(text))
    if previews and kept:
        # Wide characters can leave a preview up to 3 bytes under its allocation.
        assert max(kept) <= max(previews) + 1 + 3


def test_too_many_blocks_collapse_to_one_marker_block() -> None:
    """1,192 blocks cannot fit even empty; 1,191 empty ones fit as they are."""
    fits = update([block("") for _ in range(1_191)])
    assert project_acp_update(fits) is fits
    assert json_bytes(fits["content"]) <= BUDGET
    too_many = update([block("") for _ in range(1_192)])
    assert project_acp_update(too_many)["content"] == [block(ACP_MARKER)]


def test_blocks_without_room_for_a_marker_each_collapse() -> None:
    """When the marker reservations alone exceed what is left, one marker block remains."""
    crowded = update([block("z" * 100) for _ in range(1_000)])
    projected = project_acp_update(crowded)
    assert projected["content"] == [block(ACP_MARKER)]
    assert json_bytes(projected["content"]) <= BUDGET


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(
            [
                {
                    "type": "content",
                    "content": {"type": "text", "text": "x" * 100_000, "annotations": {}},
                }
            ],
            id="extra-key-inside",
        ),
        pytest.param(
            [{"type": "content", "content": {"type": "text", "text": "x" * 100_000}, "x": 1}],
            id="extra-key-outside",
        ),
        pytest.param(
            [block("x" * 100_000), {"type": "diff", "path": "a", "oldText": "", "newText": "b"}],
            id="mixed-with-diff",
        ),
        pytest.param([{"type": "terminal", "terminalId": "t1"}], id="terminal"),
        pytest.param(
            [{"type": "content", "content": {"type": "image", "data": "A" * 100_000}}],
            id="media",
        ),
        pytest.param({"type": "content"}, id="not-a-list"),
    ],
)
def test_non_canonical_content_is_left_alone(content: Any) -> None:
    """Diffs, terminals, media and blocks with extra keys keep the whole field as is."""
    original = update(content)
    assert project_acp_update(original) is original


def test_media_blocks_within_their_cap_are_kept_whole_beside_bounded_text() -> None:
    """Text is bounded as if alone; images and audio are never cut, and keep their place."""
    image, sound = media("A" * 2_000_000), media("B" * 1_000_000, "audio/wav", "audio")
    fits = update([block("caption"), image, sound], raw_output="caption")
    assert project_acp_update(fits) is fits
    long = "x" * 200_000
    projected = project_acp_update(update([block(long), image, block("tail"), sound]))
    first, kept_image, tail, kept_sound = projected["content"]
    assert (kept_image, kept_sound) == (image, sound)
    assert kept_image is image
    assert tail == block("tail")
    assert ACP_MARKER in first["content"]["text"]
    assert json_bytes([first, tail]) <= BUDGET


def test_media_over_the_cap_become_notes_in_order() -> None:
    """The first media that fit stay; the next that does not becomes a one-line note."""
    three_mib = "A" * (3 * 2**20)
    one, two = media(three_mib), media(three_mib, "image/jpeg")
    projected = project_acp_update(update([block("two shots"), one, two], raw_output="two shots"))
    assert projected["content"][:2] == [block("two shots"), one]
    assert projected["content"][2] == block(
        "[image/jpeg image not shown: 2,359,296 bytes, more than the 4 MiB of media one "
        "update carries]"
    )
    assert projected["rawOutput"] == "two shots"
    assert json_bytes(projected["content"]) <= ACP_MEDIA_JSON_BYTES + BUDGET


def test_collapsed_text_leads_the_media() -> None:
    """Too many text blocks collapse to one marker; the media follow it."""
    image = media("AAAA")
    projected = project_acp_update(update([block("x")] * 1_500 + [image]))
    assert projected["content"] == [block(ACP_MARKER), image]


@pytest.mark.parametrize(
    "meta",
    [
        pytest.param({"serverId": "My-A2UI-Server"}, id="server-id"),
        pytest.param({"toolName": "present_ui"}, id="tool-name"),
        pytest.param({"toolName": "mcp__ui__present_choices"}, id="namespaced-tool-name"),
        pytest.param({"toolName": "a2ui_action", "serverId": "other"}, id="both"),
    ],
)
def test_a2ui_updates_are_exempt(meta: dict[str, str]) -> None:
    """A2UI tools carry UI commands in their display: nothing of theirs is cut."""
    original = update([block("x" * 100_000)], raw_output="y" * 100_000, _meta=meta)
    assert project_acp_update(original) is original


@pytest.mark.parametrize(
    "meta",
    [
        pytest.param({"toolName": "present_ui_v2"}, id="longer-name"),
        pytest.param({"toolName": "present_ui\n"}, id="trailing-newline"),
        pytest.param({"toolName": "xpresent_ui"}, id="no-separator"),
        pytest.param({"serverId": 7}, id="non-string"),
        pytest.param("a2ui", id="meta-not-an-object"),
    ],
)
def test_look_alike_metadata_is_not_exempt(meta: Any) -> None:
    """Only the exact A2UI markers exempt an update."""
    original = update([block("x" * 100_000)], _meta=meta)
    assert project_acp_update(original) is not original


def test_the_projection_survives_the_acp_schema_round_trip() -> None:
    """The agent-client-protocol models accept the projected update and keep it bounded."""
    original = update([block("é" * 80_000)], raw_output="é" * 80_000)
    projected = project_acp_update(original)
    model = acp.schema.ToolCallProgress.model_validate(projected)
    wire = json.loads(model.model_dump_json(by_alias=True, exclude_none=True))
    assert wire["content"] == projected["content"]
    assert json_bytes(wire["content"]) <= BUDGET
    assert json_bytes(wire["rawOutput"]) <= BUDGET
