"""Reading tool calls out of model replies: plain dicts or SDK objects, never an exception.

A call whose arguments cannot be read is still returned, with ``args={}`` and
``ToolCall.invalid`` saying why, so the scheduler answers it with an error response: every
call the model made gets an answer, or the API rejects the next request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from pydantic import JsonValue, ValidationError

from toolbatch._core import JsonTooDeep, ToolCall, check_json_depth
from toolbatch.errors import ReplyShapeError

__all__ = ["as_list", "field", "make_call", "plain", "reply_shape_error"]

_PREVIEW_CHARS: Final = 200
_JSON_TYPES: Final = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def plain(value: object) -> object:
    """``value`` as plain JSON-like data: SDK objects (pydantic models) are dumped."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            # SDK objects are built without validation, so a field may hold what its type
            # does not say (a tool input that is a string): dump it as it is, quietly.
            return dump(mode="json", exclude_none=True, warnings=False)
        except Exception:  # a foreign model_dump; the shape check reports the value
            return value
    return value


def field(mapping: Mapping[str, Any], *names: str) -> Any:
    """The value of the first of ``names`` present (camelCase or snake_case), else None."""
    for name in names:
        if name in mapping:
            return mapping[name]
    return None


def as_list(value: object) -> list[Any]:
    """``value`` if it is a list, ``[]`` for None, else ``[value]`` (kept, not dropped)."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def reply_shape_error(api: str, expected: str, reply: object) -> ReplyShapeError:
    """The error for a reply that is not any shape of ``api``'s replies."""
    try:
        shown = json.dumps(reply, ensure_ascii=False, default=repr)
    except ValueError:
        shown = repr(reply)
    return ReplyShapeError(
        f"not {api} reply: expected {expected}, got {shown[:_PREVIEW_CHARS]}", api=api
    )


def _preview(text: str) -> str:
    return repr(text[:_PREVIEW_CHARS] + ("…" if len(text) > _PREVIEW_CHARS else ""))


def _arguments(raw: object) -> tuple[dict[str, JsonValue], str | None]:
    if raw is None or raw == "":
        return {}, None  # some servers send no arguments for a tool without parameters
    value: object = raw
    if isinstance(raw, str):
        try:
            check_json_depth(raw)  # the parser recurses: unclosed "[" x 5,000 would crash it
            value = json.loads(raw)
        except JsonTooDeep as exc:
            return {}, f"arguments refused: {exc}: {_preview(raw)}"
        except ValueError as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            return {}, f"arguments are not valid JSON ({reason}): {_preview(raw)}"
    if isinstance(value, Mapping):
        return dict(value), None
    kind = _JSON_TYPES.get(type(value), type(value).__name__)
    shown = raw if isinstance(raw, str) else json.dumps(value, default=repr)
    return {}, f"arguments must be a JSON object, got {kind}: {_preview(shown)}"


def make_call(
    raw_id: object,
    raw_name: object,
    raw_args: object,
    ordinal: int,
    *,
    invalid: str | None = None,
) -> ToolCall:
    """A ``ToolCall`` from a reply's raw values; unreadable pieces make it invalid.

    A missing id is left empty here: :func:`with_ids` gives it one no other call of the
    reply has, so the call is still answered (and paired when the history is sent back).
    """
    call_id = raw_id if isinstance(raw_id, str) and raw_id else ""
    name = raw_name if isinstance(raw_name, str) else ""
    args, reason = _arguments(raw_args)
    if invalid is None and not name:
        invalid = "the call names no tool"
    try:  # a reply's arguments come from outside: JSON values all the way down
        return ToolCall.model_validate(
            {
                "id": call_id,
                "name": name,
                "args": args,
                "ordinal": ordinal,
                "invalid": invalid or reason,
            }
        )
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(step) for step in problem["loc"])
        return ToolCall(
            id=call_id,
            name=name,
            args={},
            ordinal=ordinal,
            invalid=f"arguments are not JSON values ({where}: {problem['msg']})",
        )


def with_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """``calls``, each call without an id given ``call_<ordinal>`` (with a ``-<n>`` suffix
    when the model's own calls already use that id), so it never collides with one of them:
    a collision would answer it as a duplicate of a call it is not."""
    if all(call.id for call in calls):
        return calls
    taken = {call.id for call in calls if call.id}
    named: list[ToolCall] = []
    for call in calls:
        if not call.id:
            candidate, suffix = f"call_{call.ordinal}", 2
            while candidate in taken:
                candidate, suffix = f"call_{call.ordinal}-{suffix}", suffix + 1
            taken.add(candidate)
            call = call.model_copy(update={"id": candidate})
        named.append(call)
    return named
