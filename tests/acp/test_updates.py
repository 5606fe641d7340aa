"""What the editor is shown for a call and what the model reads from a prompt."""

from __future__ import annotations

import base64
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import resource_link_block, text_block
from acp.schema import EmbeddedResourceContentBlock, TextResourceContents

from toolbatch import (
    ArtifactStore,
    InlineData,
    InlineDataPart,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolResult,
)
from toolbatch.acp._stdio import project_message
from toolbatch.acp._updates import (
    TITLE_CHARS,
    CallIds,
    MessageSeparator,
    finished_update,
    prompt_text,
    tool_title,
)
from toolbatch.producers import ProducerContext
from toolbatch.producers.mcp import McpServers, load_mcp_config
from toolbatch.transports import ACP_MEDIA_JSON_BYTES, ACP_TOOL_RESULT_JSON_BYTES, json_string_bytes

MCP_TEST_SERVER = Path(__file__).resolve().parents[1] / "mcp_server" / "server.py"


@pytest.mark.parametrize(
    ("args", "title"),
    [
        pytest.param({"command": "ls -la"}, "`ls -la`", id="command"),
        pytest.param(
            {"command": "make test", "description": "Run the tests"},
            "Run the tests",
            id="described",
        ),
        pytest.param({"command": "cd src\nmake"}, "`cd src…", id="multi-line"),
    ],
)
def test_a_shell_call_is_titled_by_its_description_or_command(
    args: dict[str, str], title: str
) -> None:
    """The editor's one-line title for a shell call."""
    assert tool_title(ToolCall(id="c", name="run_shell_command", args=args)) == title


def test_a_long_command_title_is_cut() -> None:
    """A command longer than a line is shortened with an ellipsis."""
    title = tool_title(ToolCall(id="c", name="run_shell_command", args={"command": "x" * 500}))
    assert len(title) == TITLE_CHARS
    assert title.endswith("…")


def test_each_call_gets_its_own_tool_call_id() -> None:
    """A repeated model id never folds two calls into one in the editor."""
    ids = CallIds()
    assert [ids.allocate("call-1"), ids.allocate("call-1"), ids.allocate("call-2")] == [
        "call-1",
        "call-1~2",
        "call-2",
    ]


def test_mentioned_files_reach_the_model_with_the_prompt() -> None:
    """@-mentions: a link as a reference, an embedded file with its text."""
    embedded = EmbeddedResourceContentBlock(
        type="resource",
        resource=TextResourceContents(uri="file:///w/notes.md", text="remember the milk"),
    )
    text = prompt_text(
        [
            text_block("Look at these"),
            resource_link_block("main.py", "file:///w/main.py"),
            embedded,
        ]
    )
    assert text == (
        "Look at these\n@main.py <file:///w/main.py>\n--- file:///w/notes.md ---\nremember the milk"
    )


# -- finished calls: MCP results as an editor shows them ---------------------------------------


@asynccontextmanager
async def mcp_test_server() -> AsyncIterator[McpServers]:
    """The repository's real MCP test server, on stdio (entered and left in one task)."""
    entry = {"command": sys.executable, "args": [str(MCP_TEST_SERVER)]}
    async with McpServers(load_mcp_config({"mcpServers": {"t": entry}})) as servers:
        yield servers


async def shown(
    servers: McpServers, tool: str, args: dict[str, Any] | None = None, **context: Any
) -> dict[str, Any]:
    """The ``tool_call_update`` wire dict an editor receives when the call ends."""
    call = ToolCall(id="c1", name=f"mcp__t__{tool}", args=args or {})
    result = await servers.producer(call.name).run(call, ProducerContext(**context))
    update = finished_update("c1", ToolCallResponse.from_result(call, result))
    message = {
        "method": "session/update",
        "params": {"update": update.model_dump(mode="json", by_alias=True, exclude_none=True)},
    }
    projected: dict[str, Any] = project_message(message)["params"]["update"]
    return projected


async def test_an_mcp_text_result_shows_as_its_text_not_json() -> None:
    """The editor sees the server's text, not ``{"text": ...}`` in a string."""
    async with mcp_test_server() as mcp:
        update = await shown(mcp, "echo", {"text": "Echo: hi"})
        failed = await shown(mcp, "fail", {"message": "no such ticket"})
    assert update["content"] == [
        {"type": "content", "content": {"type": "text", "text": "Echo: hi"}}
    ]
    assert update["rawOutput"] == "Echo: hi"
    assert failed["status"] == "failed"
    assert "no such ticket" in failed["content"][0]["content"]["text"]
    assert "{" not in failed["rawOutput"]


async def test_mcp_images_show_as_acp_image_blocks(tmp_path: Path) -> None:
    """Text first, then the image as an ACP image block with its data and MIME type."""
    async with mcp_test_server() as mcp:
        update = await shown(mcp, "mixed", store=ArtifactStore(tmp_path))
        only_image = await shown(mcp, "image", {"width": 8, "height": 8})
        audio = await shown(mcp, "audio")
    text, image = update["content"]
    assert text["content"]["text"].startswith("mixed: text part\n[Resource <file:///tmp/report")
    assert image["type"] == "content"
    assert set(image["content"]) == {"type", "data", "mimeType"}
    assert (image["content"]["type"], image["content"]["mimeType"]) == ("image", "image/png")
    assert base64.b64decode(image["content"]["data"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert update["rawOutput"] == text["content"]["text"]
    [block] = only_image["content"]
    assert block["content"]["type"] == "image"
    assert audio["content"][-1]["content"]["type"] == "audio"


async def test_mcp_displays_stay_bounded_text_and_media_alike() -> None:
    """A huge MCP text is projected like any display; media over the cap become a note."""
    async with mcp_test_server() as mcp:
        big = await shown(mcp, "big_text", {"n_chars": 400_000})
    [block] = big["content"]
    assert json_string_bytes(block["content"]["text"]) <= ACP_TOOL_RESULT_JSON_BYTES
    assert json_string_bytes(big["rawOutput"]) <= ACP_TOOL_RESULT_JSON_BYTES
    huge_png = "A" * (ACP_MEDIA_JSON_BYTES + 4)
    call = ToolCall(id="c", name="shot")
    image = InlineDataPart(inline_data=InlineData(mime_type="image/png", data=huge_png))
    result = ToolResult(content=[TextPart(text="a screenshot"), image])
    update = finished_update("c", ToolCallResponse.from_result(call, result))
    wire = project_message(
        {
            "method": "session/update",
            "params": {"update": update.model_dump(mode="json", by_alias=True, exclude_none=True)},
        }
    )["params"]["update"]
    assert [block["content"]["text"] for block in wire["content"]] == [
        "a screenshot",
        "[image/png image not shown: 3,145,731 bytes, more than the 4 MiB of media one "
        "update carries]",
    ]


def test_each_reply_of_a_prompt_is_its_own_paragraph() -> None:
    """Chunks after the first start with a blank line; a new prompt starts afresh."""
    messages = MessageSeparator()
    texts = [messages.chunk(text).content.text for text in ("Running 3 command(s).", "Done.")]  # type: ignore[union-attr]
    messages.new_prompt()
    texts.append(messages.chunk("Next.").content.text)  # type: ignore[union-attr]
    assert texts == ["Running 3 command(s).", "\n\nDone.", "Next."]
