"""Helpers for the finalize tests: building responses, reading slots, a recording store."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from toolbatch import (
    ArtifactStore,
    FunctionResponsePart,
    Part,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolResult,
)
from toolbatch.finalize import DEFAULT_LIFECYCLE_TOOLS


def response(
    call_id: str,
    text: str,
    *,
    name: str = "run_shell_command",
    files: tuple[Path, ...] | None = None,
) -> ToolCallResponse:
    """A successful response whose output is ``text``, as a producer would return it."""
    result = ToolResult(content=text, persisted_output_files=files)
    return ToolCallResponse.from_result(ToolCall(id=call_id, name=name), result)


def output_of(item: ToolCallResponse, index: int = 0) -> str:
    """The string ``output`` of the response's ``index``-th part."""
    part = item.parts[index]
    assert isinstance(part, FunctionResponsePart)
    value = part.function_response.response["output"]
    assert isinstance(value, str)
    return value


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _body_slots(body: Mapping[str, object]) -> list[str]:
    """The measured strings of one function response body, by the issue's rule.

    A string output or error is itself; anything else is its compact JSON; the other keys
    are the compact JSON of an object holding them, after a newline when there is output.
    """
    others = {k: v for k, v in body.items() if k not in ("output", "error")}
    strings: list[str] = []
    if others:
        folded = _as_text(others)
        strings.append(_as_text(body["output"]) + "\n" + folded if "output" in body else folded)
    elif "output" in body:
        strings.append(_as_text(body["output"]))
    if "error" in body:
        strings.append(_as_text(body["error"]))
    return strings


def slot_strings(parts: Sequence[Part], *, top_level_text: bool = True) -> list[str]:
    """Every measured string of ``parts`` in slot order (protected text included)."""
    return [
        text
        for prefix, rest in split_slots(parts, frozenset(), top_level_text=top_level_text)
        for text in (prefix or rest,)
    ]


def classified_slots(
    parts: Sequence[Part],
    lifecycle: Iterable[str] = DEFAULT_LIFECYCLE_TOOLS,
    *,
    top_level_text: bool = True,
    tool: str | None = None,
    success: bool = True,
) -> list[tuple[bool, str]]:
    """Every measured string with whether it is protected (outside the budget).

    A successful function response (no ``error``) of a lifecycle tool (``tool``, else the
    part's own name) is protected whole; everything else is budgeted. Unlike
    ``split_slots``, an empty protected string is told from an empty budgeted one.
    """
    names = frozenset(lifecycle)
    slots: list[tuple[bool, str]] = []
    for part in parts:
        if isinstance(part, FunctionResponsePart):
            function_response = part.function_response
            body = function_response.response
            protected = (
                success
                and "error" not in body
                and (tool if tool is not None else function_response.name) in names
            )
            slots.extend((protected, text) for text in _body_slots(body))
        elif top_level_text and isinstance(part, TextPart):
            slots.append((False, part.text))
    return slots


def split_slots(
    parts: Sequence[Part],
    lifecycle: Iterable[str] = DEFAULT_LIFECYCLE_TOOLS,
    *,
    top_level_text: bool = True,
    tool: str | None = None,
    success: bool = True,
) -> list[tuple[str, str]]:
    """Every measured string as (protected, budgeted): one of the two is empty."""
    return [
        (text, "") if protected else ("", text)
        for protected, text in classified_slots(
            parts, lifecycle, top_level_text=top_level_text, tool=tool, success=success
        )
    ]


def protected_length(
    parts: Sequence[Part], lifecycle: Iterable[str] = DEFAULT_LIFECYCLE_TOOLS
) -> int:
    """Code points of lifecycle output that sits outside the budget."""
    return sum(len(prefix) for prefix, _ in split_slots(parts, lifecycle))


def budgeted_length(
    responses: Sequence[ToolCallResponse], lifecycle: Iterable[str] = DEFAULT_LIFECYCLE_TOOLS
) -> int:
    """Model-facing text of the batch that counts against the budget."""
    return sum(
        len(text)
        for item in responses
        for _, text in split_slots(
            item.parts, lifecycle, tool=item.name, success=item.status == "success"
        )
    )


class RecordingStore(ArtifactStore):
    """A real artifact store that also records every persist call it receives."""

    def __init__(self, root: Path, **options: object) -> None:
        super().__init__(root, **options)  # type: ignore[arg-type]
        self.calls: list[tuple[str, str, str]] = []

    async def persist(self, call_id: str, tool_name: str, text: str) -> Path:
        self.calls.append((call_id, tool_name, text))
        return await super().persist(call_id, tool_name, text)
