"""What an ACP client is shown: ``session/update`` payloads built from calls and responses.

Pure functions, no I/O: each turns a ``ToolCall``, a ``ToolCallResponse`` or a recorded
transcript entry into the ``acp.schema`` update an editor renders. The display of a
finished call is the response's display text (``display_text``: a string ``display``, the
``text`` of an MCP result's display, else the error, else the model-facing text), once as
a text block in ``content`` and once as the string ``rawOutput``; its image and audio
parts follow in ``content`` as ACP image and audio blocks. Nothing here bounds them: the
stdio transport applies ``project_acp_update`` to every ``session/update`` on its way out,
live and replayed alike.

Each model reply is one ``agent_message_chunk``; the editor joins the chunks of a prompt
into one message, so every reply after the first starts with a blank line
(``MessageSeparator``), and the words of two replies never run together.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from acp import (
    audio_block,
    image_block,
    start_tool_call,
    text_block,
    tool_content,
    update_tool_call,
)
from acp.helpers import update_agent_message_text, update_user_message_text
from acp.schema import (
    AgentMessageChunk,
    AudioContentBlock,
    ContentToolCallContent,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
    ToolCallProgress,
    ToolCallStart,
    ToolCallStatus,
    ToolCallUpdate,
    ToolKind,
    UserMessageChunk,
)

from toolbatch._core import InlineDataPart, ToolCall, ToolCallResponse
from toolbatch.agent import text_of
from toolbatch.permissions import analyze_command
from toolbatch.recorder import RecordedTurn
from toolbatch.transports import (
    ACP_MARKER,
    ACP_TOOL_RESULT_JSON_BYTES,
    display_text,
    project_json_string,
)

__all__ = [
    "MESSAGE_SEPARATOR",
    "OUTPUT_TAIL_LINES",
    "OUTPUT_TAIL_LINE_CHARS",
    "TITLE_CHARS",
    "CallIds",
    "MessageSeparator",
    "OutputTail",
    "PromptBlock",
    "SessionUpdate",
    "command_prefixes",
    "finished_update",
    "permission_tool_call",
    "progress_update",
    "prompt_text",
    "replay_updates",
    "running_update",
    "start_update",
    "tool_kind",
    "tool_title",
]

TITLE_CHARS: Final = 120
"""Longest title shown for a call; a longer command is cut with an ellipsis."""
MESSAGE_SEPARATOR: Final = "\n\n"
"""Starts every agent message chunk of a prompt after its first."""

_SHELL_TOOL: Final = "run_shell_command"

PromptBlock: TypeAlias = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)
SessionUpdate: TypeAlias = UserMessageChunk | AgentMessageChunk | ToolCallStart | ToolCallProgress


@dataclass(slots=True)
class CallIds:
    """Gives each tool call of a session its own ACP ``toolCallId``.

    The model's call id is used as is the first time; a repeat (a model that reuses ids,
    or a duplicate call in one batch) gets ``<id>~<n>``, since a client merges updates by
    ``toolCallId`` and must never fold two calls into one.
    """

    _used: set[str] = field(default_factory=set)

    def allocate(self, call_id: str) -> str:
        """A fresh ACP id for the call the model named ``call_id``."""
        candidate = call_id or "call"
        suffix = 1
        while candidate in self._used:
            suffix += 1
            candidate = f"{call_id}~{suffix}"
        self._used.add(candidate)
        return candidate


@dataclass(slots=True)
class MessageSeparator:
    """Makes each model reply of a prompt its own paragraph in the editor.

    ``chunk(text)`` is the ``agent_message_chunk`` for a reply; ``new_prompt()`` starts
    over (the user spoke, so the next reply starts a new message).
    """

    _spoken: bool = False

    def chunk(self, text: str) -> AgentMessageChunk:
        """The chunk for one reply's ``text``, separated from the reply before it."""
        shown = MESSAGE_SEPARATOR + text if self._spoken else text
        self._spoken = True
        return update_agent_message_text(shown)

    def new_prompt(self) -> None:
        """The user spoke: the next reply is the first of a new message."""
        self._spoken = False


def tool_kind(name: str) -> ToolKind:
    """The ACP kind of a tool, which picks the editor's icon."""
    return "execute" if name == _SHELL_TOOL else "other"


def tool_title(call: ToolCall) -> str:
    """A one-line title: the shell command (or its description), else the tool name."""
    if call.name == _SHELL_TOOL:
        description = call.args.get("description")
        command = call.args.get("command")
        if isinstance(description, str) and description.strip():
            title = description.strip()
        elif isinstance(command, str) and command.strip():
            title = f"`{command.strip()}`"
        else:
            title = call.name
    else:
        title = call.name
    first_line = title.split("\n", 1)[0]
    if first_line != title or len(first_line) > TITLE_CHARS:
        first_line = first_line[: TITLE_CHARS - 1].rstrip() + "…"
    return first_line


def bounded_input(args: dict[str, Any]) -> dict[str, Any]:
    """A call's arguments as ``rawInput``: within ``ACP_TOOL_RESULT_JSON_BYTES`` of JSON.

    A 3 MB command once made a 3 MB ``tool_call`` update and a 3 MB permission request.
    Arguments over the bound show their long strings head and tail around ``ACP_MARKER``,
    each to an equal share; if that is not enough (many small values), the whole JSON is
    projected into one string under ``"truncated"``. The title already shows the command cut
    to one line; the call itself runs with its full arguments.
    """
    rendered = json.dumps(args, ensure_ascii=False, default=repr)
    if len(rendered) * 4 <= ACP_TOOL_RESULT_JSON_BYTES or (
        len(rendered.encode("utf-8", "surrogatepass")) <= ACP_TOOL_RESULT_JSON_BYTES
    ):
        return args
    share = ACP_TOOL_RESULT_JSON_BYTES // (2 * max(len(args), 1))
    bounded = {
        key: project_json_string(value, max_bytes=share, marker=ACP_MARKER)
        if isinstance(value, str)
        else value
        for key, value in args.items()
    }
    again = json.dumps(bounded, ensure_ascii=False, default=repr)
    if len(again.encode("utf-8", "surrogatepass")) <= ACP_TOOL_RESULT_JSON_BYTES:
        return bounded
    half = ACP_TOOL_RESULT_JSON_BYTES // 2
    return {"truncated": project_json_string(rendered, max_bytes=half, marker=ACP_MARKER)}


def start_update(tool_call_id: str, call: ToolCall) -> ToolCallStart:
    """``tool_call``: the model asked for ``call``; it waits to run (or to be allowed)."""
    return start_tool_call(
        tool_call_id,
        tool_title(call),
        kind=tool_kind(call.name),
        status="pending",
        raw_input=bounded_input(dict(call.args)),
    )


def permission_tool_call(
    tool_call_id: str, call: ToolCall, *, reason: str | None = None
) -> ToolCallUpdate:
    """The ``toolCall`` of a ``session/request_permission`` for ``call``; ``reason`` (the
    rule or hook that asked) is its content, so the editor shows why it is asked."""
    content = [tool_content(text_block(f"Asked by {reason}."))] if reason else None
    return ToolCallUpdate(
        tool_call_id=tool_call_id,
        title=tool_title(call),
        kind=tool_kind(call.name),
        status="pending",
        raw_input=bounded_input(dict(call.args)),
        content=content,
    )


_SUBCOMMAND_PROGRAMS: Final = frozenset(
    {
        "apt", "apt-get", "brew", "bun", "cargo", "docker", "dotnet", "gh", "git", "go",
        "gradle", "helm", "kubectl", "make", "mvn", "npm", "pip", "pip3", "pnpm", "podman",
        "poetry", "systemctl", "terraform", "uv", "yarn",
    }
)  # fmt: skip
"""Programs whose second word is a subcommand (``git status`` is not ``git push``)."""
_SUBCOMMAND_WORD: Final = re.compile(r"[a-z][a-z0-9-]*")


def command_prefixes(call: ToolCall) -> list[str]:
    """The prefixes an "always allow" of a shell call remembers, one per subcommand: the
    program (``touch``, ``ls``), with its subcommand for programs that have them (``git
    status``, ``npm test``), as Claude Code's "don't ask again for `git status` commands".
    A command that is not a plain sequence of simple commands (see
    ``toolbatch.permissions``) remembers nothing: it is asked again next time."""
    command = call.args.get("command")
    if not isinstance(command, str):
        return []
    prefixes: list[str] = []
    for sub in analyze_command(command).plain:
        words = sub.words
        if not words:
            continue
        prefix = words[0]
        if (
            len(words) > 1
            and words[0] in _SUBCOMMAND_PROGRAMS
            and _SUBCOMMAND_WORD.fullmatch(words[1])
        ):
            prefix = f"{words[0]} {words[1]}"
        if prefix not in prefixes:
            prefixes.append(prefix)
    return prefixes


def running_update(tool_call_id: str) -> ToolCallProgress:
    """``tool_call_update``: the call started running."""
    return update_tool_call(tool_call_id, status="in_progress")


def progress_update(tool_call_id: str, message: str) -> ToolCallProgress:
    """``tool_call_update``: a running call's progress (shown as its content): a report,
    or its latest output lines (``OutputTail.text``)."""
    return update_tool_call(
        tool_call_id, status="in_progress", content=[tool_content(text_block(message))]
    )


OUTPUT_TAIL_LINES: Final = 20
"""How many of a running command's latest output lines its ``tool_call_update`` shows."""
OUTPUT_TAIL_LINE_CHARS: Final = 400
"""A longer output line is shown cut, with an ellipsis."""


@dataclass(slots=True, eq=False)
class OutputTail:
    """The latest output lines of one running call, bounded, and its latest progress report.

    ``feed`` takes the output as it comes (any split); ``text`` is what the client shows:
    at most ``OUTPUT_TAIL_LINES`` lines of at most ``OUTPUT_TAIL_LINE_CHARS`` each (the
    unfinished last line included), then the report, if any.
    """

    lines: deque[str] = field(default_factory=lambda: deque(maxlen=OUTPUT_TAIL_LINES))
    partial: str = ""
    message: str | None = None
    changed: bool = False
    shown_at: float = -math.inf

    def feed(self, text: str) -> None:
        pieces = (self.partial + text).split("\n")
        self.partial = _cut_line(pieces.pop(), tail=True)
        self.lines.extend(_cut_line(piece.rstrip("\r")) for piece in pieces[-OUTPUT_TAIL_LINES:])
        self.changed = True

    def report(self, message: str) -> None:
        self.message = message
        self.changed = True

    def text(self) -> str:
        shown = list(self.lines)
        if self.partial:
            shown = [*shown[1 - OUTPUT_TAIL_LINES :], self.partial.rstrip("\r")]
        if self.message:
            shown.append(f"[{self.message}]")
        return "\n".join(shown)


def _cut_line(line: str, *, tail: bool = False) -> str:
    if len(line) <= OUTPUT_TAIL_LINE_CHARS:
        return line
    if tail:  # an unfinished line keeps its end: what was printed last
        return "…" + line[1 - OUTPUT_TAIL_LINE_CHARS :]
    return line[: OUTPUT_TAIL_LINE_CHARS - 1] + "…"


def _status(response: ToolCallResponse) -> ToolCallStatus:
    return "completed" if response.status == "success" else "failed"


def finished_update(tool_call_id: str, response: ToolCallResponse) -> ToolCallProgress:
    """``tool_call_update``: the call ended; its display as content and as ``rawOutput``,
    its image and audio parts as image and audio blocks after the text."""
    display = display_text(response)
    media = _media_content(response)
    content = [tool_content(text_block(display))] if display or not media else []
    return update_tool_call(
        tool_call_id,
        status=_status(response),
        content=[*content, *media],
        raw_output=display,
    )


def _media_content(response: ToolCallResponse) -> list[ContentToolCallContent]:
    blocks = []
    for part in response.parts:
        if not isinstance(part, InlineDataPart):
            continue
        data = part.inline_data
        kind = data.mime_type.split("/", 1)[0]
        if kind == "image":
            blocks.append(tool_content(image_block(data.data, data.mime_type)))
        elif kind == "audio":
            blocks.append(tool_content(audio_block(data.data, data.mime_type)))
    return blocks


def prompt_text(blocks: Sequence[PromptBlock]) -> str:
    """The user's prompt as the model's text: text blocks, then referenced context.

    A resource link becomes a ``@name <uri>`` line and an embedded text resource its text
    under a ``--- <uri> ---`` header; media (not advertised in the capabilities) is noted,
    not sent.
    """
    pieces: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            pieces.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            pieces.append(f"@{block.name} <{block.uri}>")
        elif isinstance(block, EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                pieces.append(f"--- {resource.uri} ---\n{resource.text}")
            else:
                pieces.append(f"[binary resource {resource.uri} not included]")
        else:
            pieces.append(f"[{block.type} content not included]")
    return "\n".join(pieces)


def replay_updates(entries: Sequence[RecordedTurn], ids: CallIds) -> Iterator[SessionUpdate]:
    """The updates that show a recorded session again, in order (for ``session/load``).

    User and model messages become message chunks; each call a model message made becomes
    a ``tool_call``, and the recorded turn that answered it one ``tool_call_update`` with
    the finalized response (the display of the live session was not recorded: the
    replay shows what the model received).
    """
    waiting: list[tuple[str, str]] = []  # (model call id, ACP id), in the model's order
    messages = MessageSeparator()
    for entry in entries:
        if entry.type == "message":
            text = text_of(entry.parts)
            if entry.role == "user":
                messages.new_prompt()
                if text:
                    yield update_user_message_text(text)
                continue
            if text:
                yield messages.chunk(text)
            for call in entry.tool_calls:
                tool_call_id = ids.allocate(call.id)
                waiting.append((call.id, tool_call_id))
                yield start_update(tool_call_id, call)
            continue
        for response in entry.responses:
            announced = _take(waiting, response.call_id)
            if announced is None:  # a record without its model message: announce it here
                announced = ids.allocate(response.call_id)
                yield start_tool_call(
                    announced, response.name, kind=tool_kind(response.name), status="pending"
                )
            yield finished_update(announced, response)
        waiting.clear()


def _take(waiting: list[tuple[str, str]], call_id: str) -> str | None:
    """The ACP id of the earliest call still waiting under ``call_id`` (first in, first out)."""
    for index, (model_id, tool_call_id) in enumerate(waiting):
        if model_id == call_id:
            del waiting[index]
            return tool_call_id
    return None
