"""Helpers for the finalize tests: building responses, reading slots, a recording store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from toolbatch.finalize import DEFAULT_LIFECYCLE_REMINDERS


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


def slot_strings(parts: Sequence[Part], *, top_level_text: bool = True) -> list[str]:
    """Every measured string of ``parts`` in slot order (protected text included)."""
    strings: list[str] = []
    for part in parts:
        if isinstance(part, FunctionResponsePart):
            body = part.function_response.response
            strings += [v for v in (body.get("output"), body.get("error")) if isinstance(v, str)]
        elif top_level_text and isinstance(part, TextPart):
            strings.append(part.text)
    return strings


def split_slots(
    parts: Sequence[Part],
    reminders: Mapping[str, Sequence[str]] = DEFAULT_LIFECYCLE_REMINDERS,
    *,
    top_level_text: bool = True,
) -> list[tuple[str, str]]:
    """Every measured string as (protected prefix, budgeted rest), by the issue's rule.

    A successful output of a registered tool that equals a reminder is all prefix; one that
    starts with a reminder and a blank line has that much as prefix. Longest reminder wins.
    """
    split: list[tuple[str, str]] = []
    for part in parts:
        if isinstance(part, FunctionResponsePart):
            function_response = part.function_response
            body = function_response.response
            output, error = body.get("output"), body.get("error")
            if isinstance(output, str):
                prefix = 0
                if error is None:
                    for reminder in reminders.get(function_response.name, ()):
                        if output == reminder:
                            prefix = max(prefix, len(output))
                        elif output.startswith(reminder + "\n\n"):
                            prefix = max(prefix, len(reminder) + 2)
                split.append((output[:prefix], output[prefix:]))
            if isinstance(error, str):
                split.append(("", error))
        elif top_level_text and isinstance(part, TextPart):
            split.append(("", part.text))
    return split


def protected_length(
    parts: Sequence[Part],
    reminders: Mapping[str, Sequence[str]] = DEFAULT_LIFECYCLE_REMINDERS,
) -> int:
    """Code points of lifecycle reminders that sit outside the budget."""
    return sum(len(prefix) for prefix, _ in split_slots(parts, reminders))


def budgeted_length(
    responses: Sequence[ToolCallResponse],
    reminders: Mapping[str, Sequence[str]] = DEFAULT_LIFECYCLE_REMINDERS,
) -> int:
    """Model-facing text of the batch that counts against the budget."""
    return sum(
        sum(map(len, slot_strings(item.parts))) - protected_length(item.parts, reminders)
        for item in responses
    )


class RecordingStore(ArtifactStore):
    """A real artifact store that also records every persist call it receives."""

    def __init__(self, root: Path, **options: object) -> None:
        super().__init__(root, **options)  # type: ignore[arg-type]
        self.calls: list[tuple[str, str, str]] = []

    async def persist(self, call_id: str, tool_name: str, text: str) -> Path:
        self.calls.append((call_id, tool_name, text))
        return await super().persist(call_id, tool_name, text)
