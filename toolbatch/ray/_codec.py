"""What crosses between a driver and a session host: plain, JSON-shaped dicts and lists.

Nothing toolbatch keeps internally is pickled. Responses travel as their wire form (the
parts exactly as a model receives them) plus, explicitly, the internal fields a driver
needs to record and display them as a local scheduler would: ``persisted_output_files``,
the files media parts were saved to, ``call_args`` and the per-call hooks' notes.
``finalize_state`` never travels: a rebuilt response has none, which the finalizer treats
as "nothing of mine here" (it checks that state against the text before use anyway).

A decoded turn shares its part objects between ``responses`` and ``parts``, as the
scheduler's own turns do, so a driver holds each part once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TypeAlias

from toolbatch._core import (
    InlineDataPart,
    Part,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    Turn,
    parts_adapter,
)

__all__ = [
    "Wire",
    "decode_call",
    "decode_declarations",
    "decode_response",
    "decode_turn",
    "encode_call",
    "encode_declarations",
    "encode_response",
    "encode_turn",
    "stand_in_call",
]

Wire: TypeAlias = dict[str, Any]
"""One encoded value: a dict of JSON-shaped values only."""

_FLAGS: Final = ("needs_permission", "read_only", "trusted")


def _dump_parts(parts: Sequence[Part]) -> list[Any]:
    dumped: list[Any] = parts_adapter.dump_python(list(parts), mode="json", by_alias=True)
    return dumped


def encode_call(call: ToolCall) -> Wire:
    """A call as a dict (``ToolCall.model_validate`` reads it back)."""
    return call.model_dump(mode="json")


def decode_call(data: Mapping[str, Any]) -> ToolCall:
    """A call from :func:`encode_call`'s dict."""
    return ToolCall.model_validate(data)


def stand_in_call(raw: object, index: int) -> ToolCall:
    """The call a batch entry stands for, even when it is not a valid call: its own id and
    name when it has them, else ``invalid-call-<index>`` (the scheduler's stand-in)."""
    if isinstance(raw, ToolCall):
        return raw
    if isinstance(raw, Mapping):
        try:
            return ToolCall.model_validate(raw)
        except ValueError:
            raw_id, raw_name = raw.get("id"), raw.get("name")
            call_id = raw_id if isinstance(raw_id, str) and raw_id else f"invalid-call-{index}"
            name = raw_name if isinstance(raw_name, str) and raw_name else "invalid_call"
            return ToolCall(id=call_id, name=name, ordinal=index)
    return ToolCall(id=f"invalid-call-{index}", name="invalid_call", ordinal=index)


def encode_response(response: ToolCallResponse) -> Wire:
    """A response's wire form plus the internal fields a driver records and displays."""
    files = response.persisted_output_files
    media = {
        str(position): str(part.inline_data.persisted_file)
        for position, part in enumerate(response.parts)
        if isinstance(part, InlineDataPart) and part.inline_data.persisted_file is not None
    }
    return {
        "call_id": response.call_id,
        "name": response.name,
        "parts": _dump_parts(response.parts),
        "display": response.display,
        "error": response.error,
        "error_type": response.error_type,
        "status": response.status,
        "persisted_output_files": None if files is None else [str(path) for path in files],
        "media_files": media,
        "call_args": response.call_args,
        "hook_notes": list(response.hook_notes),
        "hook_stop": response.hook_stop,
    }


def _with_media_files(parts: list[Part], media: Mapping[str, str]) -> list[Part]:
    for position, path in media.items():
        index = int(position)
        part = parts[index]
        if isinstance(part, InlineDataPart):
            data = part.inline_data.model_copy(update={"persisted_file": Path(path)})
            parts[index] = part.model_copy(update={"inline_data": data})
    return parts


def decode_response(data: Mapping[str, Any]) -> ToolCallResponse:
    """A response from :func:`encode_response`'s dict (wire fields validated)."""
    parts = _with_media_files(parts_adapter.validate_python(data["parts"]), data["media_files"])
    response = ToolCallResponse.model_validate(
        {
            "call_id": data["call_id"],
            "name": data["name"],
            "parts": [],
            "display": data["display"],
            "error": data["error"],
            "error_type": data["error_type"],
            "status": data["status"],
        }
    )
    files = data["persisted_output_files"]
    # The parts were validated above; set them with the internal fields, unvalidated, so
    # the media parts keep the files they were saved to.
    return response.model_copy(
        update={
            "parts": parts,
            "persisted_output_files": None if files is None else tuple(map(Path, files)),
            "call_args": data["call_args"],
            "hook_notes": tuple(data["hook_notes"]),
            "hook_stop": data["hook_stop"],
        }
    )


def encode_turn(turn: Turn) -> Wire:
    """A completed turn: its responses (each with its parts) and its own context parts."""
    return {
        "responses": [encode_response(response) for response in turn.responses],
        "context_parts": _dump_parts(turn.context_parts),
        "stop_reason": turn.stop_reason,
    }


def decode_turn(data: Mapping[str, Any]) -> Turn:
    """A turn from :func:`encode_turn`'s dict; ``parts`` are the responses' own objects."""
    responses = [decode_response(item) for item in data["responses"]]
    parts: list[Part] = [part for response in responses for part in response.parts]
    parts.extend(parts_adapter.validate_python(data["context_parts"]))
    return Turn(responses=responses, parts=parts, stop_reason=data["stop_reason"])


def encode_declarations(declarations: Sequence[ToolDeclaration]) -> list[Wire]:
    """Declarations with the flags their JSON leaves out (permission, read-only, trust)."""
    return [
        {**declaration.model_dump(mode="json"), **{f: getattr(declaration, f) for f in _FLAGS}}
        for declaration in declarations
    ]


def decode_declarations(data: Sequence[Mapping[str, Any]]) -> list[ToolDeclaration]:
    """Declarations from :func:`encode_declarations`' list."""
    return [ToolDeclaration.model_validate(item) for item in data]
