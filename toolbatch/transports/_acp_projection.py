"""The ACP display projection: bound the text of ``tool_call_update`` notifications.

An editor receives a tool call's display through ``session/update`` notifications. This
projection bounds, in each ``tool_call_update``, two fields to ``ACP_TOOL_RESULT_JSON_BYTES``
of JSON each (UTF-8 bytes as ``JSON.stringify`` writes them):

* ``content``, when it is a list of canonical text and media blocks, exactly
  ``{"type": "content", "content": {"type": "text", "text": <str>}}`` and
  ``{"type": "content", "content": {"type": "image" | "audio", "data": <base64 str>,
  "mimeType": <str>}}``. The text blocks share the budget, their skeleton's bytes
  counted: small blocks stay whole, long ones get a 20/80 head and tail preview around
  ``ACP_MARKER``, by a max-min (water-fill) allocation. When too many blocks leave no room
  for a marker each, they collapse to one marker block (media blocks after it). Any other
  block (diff, terminal, resource, extra keys such as ``annotations``) leaves the whole
  field alone.
* Media blocks have a budget of their own, ``ACP_MEDIA_JSON_BYTES`` (4 MiB of JSON) per
  update, for all of them together: in order, each that still fits is kept whole (media
  is never cut), each that does not is replaced by a one-line text block naming its type
  and size, which then counts as text. A full-HD screenshot fits; a frame stays far below
  the 50 MiB line limit of the ACP SDKs.
* ``rawOutput``, when it is a string. When it equals the text of the only text block, it
  gets the same projected text as that block.

Updates whose ``_meta`` marks an A2UI tool are exempt: their display carries UI commands
that the client parses after this boundary. The projection changes what the editor shows,
never the model-facing response or the recording.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from toolbatch._core import base64_decoded_size
from toolbatch.transports._json_string import json_string_bytes, project_json_string

__all__ = [
    "ACP_MARKER",
    "ACP_MEDIA_JSON_BYTES",
    "ACP_TOOL_RESULT_JSON_BYTES",
    "project_acp_update",
]

ACP_TOOL_RESULT_JSON_BYTES: Final = 65_536
"""Budget of ``content``'s text and, separately, of ``rawOutput`` in one ``tool_call_update``."""
ACP_MEDIA_JSON_BYTES: Final = 4 * 2**20
"""Budget of the image and audio blocks of one ``tool_call_update``, together."""

ACP_MARKER: Final = "\n[... truncated for ACP transport ...]\n"
"""What replaces the middle of an ACP display text that is over budget."""

_QUOTE_BYTES: Final = 2
_EMPTY_LIST_BYTES: Final = len("[]")
_SEPARATOR_BYTES: Final = len(",")
_EMPTY_TEXT_BLOCK_BYTES: Final = len('{"type":"content","content":{"type":"text","text":""}}')
_MAX_TEXT_BLOCKS: Final = (ACP_TOOL_RESULT_JSON_BYTES - _EMPTY_LIST_BYTES + _SEPARATOR_BYTES) // (
    _EMPTY_TEXT_BLOCK_BYTES + _SEPARATOR_BYTES
)
"""1,191: one more and even empty blocks overflow the budget."""
_MARKER_PAYLOAD_BYTES: Final = json_string_bytes(ACP_MARKER) - _QUOTE_BYTES
_EMPTY_MEDIA_BLOCK_BYTES: Final = len(
    '{"type":"content","content":{"type":"image","data":"","mimeType":""}}'
)
_MEDIA_TYPES: Final = frozenset({"image", "audio"})
_A2UI_TOOL_NAME: Final = re.compile(r"(?:^|__)(?:present_ui|present_choices|a2ui_action)\Z")

_Block = dict[str, Any]


def project_acp_update(update: dict[str, Any]) -> dict[str, Any]:
    """``update`` with its display text bounded for the ACP transport.

    Args:
        update: the wire dict (camelCase keys) of a ``session/update`` notification's
            ``update``, e.g. ``{"sessionUpdate": "tool_call_update", "toolCallId": ...,
            "content": [...], "rawOutput": ...}``.

    Returns:
        ``update`` itself when nothing needs bounding (any other ``sessionUpdate``, A2UI
        tools, fields that already fit, non-canonical content); otherwise a shallow copy
        with new ``content`` and/or ``rawOutput``. Unchanged blocks keep their identity;
        ``update`` is never modified.
    """
    if update.get("sessionUpdate") != "tool_call_update" or _is_a2ui(update.get("_meta")):
        return update
    blocks = _canonical_blocks(update.get("content"))
    raw_output = update.get("rawOutput")
    changes: dict[str, Any] = {}
    if blocks is not None:
        bounded = _bound_media(blocks)
        texts = [block for block in bounded if _is_text(block)]
        projected = _project_blocks(texts)
        if bounded is not blocks or projected is not texts:
            changes["content"] = _reassemble(bounded, texts, projected)
        if len(texts) == 1 and isinstance(raw_output, str) and raw_output == _text(texts[0]):
            if projected is not texts:
                changes["rawOutput"] = _text(projected[0])
            return {**update, **changes} if changes else update
    if isinstance(raw_output, str):
        bounded_raw = project_json_string(
            raw_output, max_bytes=ACP_TOOL_RESULT_JSON_BYTES, marker=ACP_MARKER
        )
        if bounded_raw is not raw_output:
            changes["rawOutput"] = bounded_raw
    return {**update, **changes} if changes else update


def _is_a2ui(meta: object) -> bool:
    if not isinstance(meta, dict):
        return False
    server_id = meta.get("serverId")
    if isinstance(server_id, str) and "a2ui" in server_id.lower():
        return True
    tool_name = meta.get("toolName")
    return isinstance(tool_name, str) and _A2UI_TOOL_NAME.search(tool_name) is not None


def _canonical_blocks(content: object) -> list[_Block] | None:
    """``content`` when every block is a canonical text or media block, else ``None``."""
    if not isinstance(content, list):
        return None
    for block in content:
        if not (
            isinstance(block, dict)
            and len(block) == 2
            and block.get("type") == "content"
            and isinstance(inner := block.get("content"), dict)
            and (
                (len(inner) == 2 and inner.get("type") == "text" and isinstance(inner["text"], str))
                or (
                    len(inner) == 3
                    and inner.get("type") in _MEDIA_TYPES
                    and isinstance(inner.get("data"), str)
                    and isinstance(inner.get("mimeType"), str)
                )
            )
        ):
            return None
    return content


def _is_text(block: _Block) -> bool:
    return bool(block["content"]["type"] == "text")


def _text(block: _Block) -> str:
    text: str = block["content"]["text"]
    return text


def _text_block(text: str) -> _Block:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _bound_media(blocks: list[_Block]) -> list[_Block]:
    """``blocks`` (the same list) when their media fit ``ACP_MEDIA_JSON_BYTES``; else a
    copy in which each media block that no longer fits, in order, is a one-line note."""
    remaining = ACP_MEDIA_JSON_BYTES
    bounded: list[_Block] | None = None
    for index, block in enumerate(blocks):
        if _is_text(block):
            continue
        media = block["content"]
        cost = _EMPTY_MEDIA_BLOCK_BYTES + _capped_payload_bytes(media["data"], remaining)
        cost += _capped_payload_bytes(media["mimeType"], remaining)  # "image", "audio": 5 each
        if cost <= remaining:
            remaining -= cost
            continue
        if bounded is None:
            bounded = list(blocks)
        size = base64_decoded_size(media["data"])
        bounded[index] = _text_block(
            f"[{media['mimeType']} {media['type']} not shown: {size:,} bytes, more than the "
            f"{ACP_MEDIA_JSON_BYTES // 2**20} MiB of media one update carries]"
        )
    return blocks if bounded is None else bounded


def _reassemble(blocks: list[_Block], texts: list[_Block], projected: list[_Block]) -> list[_Block]:
    """``blocks`` with its text blocks replaced by their ``projected`` versions, in place."""
    if len(projected) != len(texts):  # collapsed to one marker: it leads, media follow
        return [*projected, *(block for block in blocks if not _is_text(block))]
    replaced = iter(projected)
    return [next(replaced) if _is_text(block) else block for block in blocks]


def _project_blocks(blocks: list[_Block]) -> list[_Block]:
    """``blocks`` (the same list) when they fit, else the bounded list."""
    count = len(blocks)
    if count > _MAX_TEXT_BLOCKS:
        return [_text_block(ACP_MARKER)]
    skeleton = _EMPTY_LIST_BYTES
    if count:
        skeleton += count * _EMPTY_TEXT_BLOCK_BYTES + (count - 1) * _SEPARATOR_BYTES
    available = ACP_TOOL_RESULT_JSON_BYTES - skeleton
    # A block over `available` cannot fit whatever the others hold, and every code point
    # costs at least a byte, so measuring stops there: the cost stays bounded by the budget.
    payloads = [_capped_payload_bytes(_text(block), available) for block in blocks]
    if sum(payloads) <= available:
        return blocks
    allocations = _allocate(payloads, available)
    if allocations is None:
        return [_text_block(ACP_MARKER)]
    projected = []
    for block, payload, allocation in zip(blocks, payloads, allocations, strict=True):
        if payload <= allocation:
            projected.append(block)
        else:
            text = project_json_string(
                _text(block), max_bytes=allocation + _QUOTE_BYTES, marker=ACP_MARKER
            )
            projected.append(_text_block(text))
    return projected


def _capped_payload_bytes(text: str, cap: int) -> int:
    """Payload bytes of ``text``, or ``cap + 1`` when they are sure to exceed ``cap``."""
    if len(text) > cap:
        return cap + 1
    return json_string_bytes(text) - _QUOTE_BYTES


def _allocate(payloads: Sequence[int], available: int) -> list[int] | None:
    """Max-min allocation of ``available`` bytes over blocks needing ``payloads`` bytes.

    Each block first reserves room for a marker (or its whole text, when shorter); the rest
    is water-filled: a common level rises over the sorted remaining needs until the bytes
    run out, and the last few bytes go one each, in block order, to blocks still above the
    level. ``None`` when not even the reservations fit. O(n log n).
    """
    base = [min(payload, _MARKER_PAYLOAD_BYTES) for payload in payloads]
    remaining = available - sum(base)
    if remaining < 0:
        return None
    needs = [payload - reserved for payload, reserved in zip(payloads, base, strict=True)]
    rising = sorted(need for need in needs if need > 0)
    active = len(rising)
    level = 0
    extra = 0
    position = 0
    while position < len(rising) and remaining > 0:
        next_level = rising[position]
        cost = (next_level - level) * active
        if cost > remaining:
            level += remaining // active
            extra = remaining % active
            break
        level = next_level
        remaining -= cost
        while position < len(rising) and rising[position] == next_level:
            position += 1
            active -= 1
    allocations = [reserved + min(need, level) for reserved, need in zip(base, needs, strict=True)]
    for index, need in enumerate(needs):
        if extra == 0:
            break
        if need > level:
            allocations[index] += 1
            extra -= 1
    return allocations
