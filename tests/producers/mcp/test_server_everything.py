"""The official reference server, @modelcontextprotocol/server-everything, run with npx."""

from __future__ import annotations

import base64
import json
import shutil
import struct
from collections.abc import Iterator

import pytest
from anyio.from_thread import BlockingPortal

from tests.producers.mcp._support import model_response, run, running
from toolbatch import InlineDataPart, ToolCall, ToolCallResponse
from toolbatch.acp._updates import finished_update
from toolbatch.producers.mcp import McpServers
from toolbatch.transports import tool_result_content

# npx fetches the package on first use, which can take a minute on a cold cache.
START_TIMEOUT_S = 240.0
SECRET = "TOOLBATCH_TEST_AGENT_SECRET"

pytestmark = pytest.mark.skipif(
    shutil.which("npx") is None or shutil.which("node") is None,
    reason="node/npx is not installed: cannot run @modelcontextprotocol/server-everything",
)


@pytest.fixture(scope="module")
def servers(portal: BlockingPortal) -> Iterator[McpServers]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET, "do-not-leak")
        document = {
            "everything": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-everything", "stdio"],
                "env": {"TOOLBATCH_TEST_GIVEN": "from-config"},
            }
        }
        with running(portal, document, start_timeout_s=START_TIMEOUT_S) as started:
            yield started


def test_discovery_lists_the_reference_tools(servers: McpServers) -> None:
    """Its tools are exposed under mcp__everything__ with their schemas."""
    assert servers.failures == {}
    names = {producer.declaration.name for producer in servers.producers()}
    assert {
        "mcp__everything__echo",
        "mcp__everything__get-tiny-image",
        "mcp__everything__trigger-long-running-operation",
        "mcp__everything__get-env",
    } <= names
    echo = servers.producer("mcp__everything__echo").declaration
    assert echo.description
    assert isinstance(echo.input_schema["properties"], dict)
    assert "message" in echo.input_schema["properties"]


def test_a_plain_call(portal: BlockingPortal, servers: McpServers) -> None:
    """echo answers with its message."""
    result = run(portal, servers, "mcp__everything__echo", {"message": "hello from toolbatch"})
    assert model_response("e", result) == {"output": "Echo: hello from toolbatch"}


def test_the_image_tool_keeps_its_media_untouched(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """The tiny PNG arrives as inlineData (20x20), the text around it as output."""
    result = run(portal, servers, "mcp__everything__get-tiny-image")
    assert result.error is None
    assert isinstance(result.content, list)
    [image] = [part for part in result.content if isinstance(part, InlineDataPart)]
    assert image.inline_data.mime_type == "image/png"
    png = base64.b64decode(image.inline_data.data, validate=True)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert struct.unpack(">II", png[16:24]) == (20, 20)
    output = model_response("i", result)["output"]
    assert "image you requested" in output
    assert image.inline_data.data not in output


def test_editors_and_stream_json_show_its_text_and_its_image(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """ACP: the text, then an image block; stream-json: the text, then a line for the image."""
    call = ToolCall(id="i", name="mcp__everything__get-tiny-image")
    response = ToolCallResponse.from_result(call, run(portal, servers, call.name))
    wire = finished_update("i", response).model_dump(mode="json", by_alias=True, exclude_none=True)
    text, image = wire["content"]
    assert "image you requested" in text["content"]["text"]
    assert not text["content"]["text"].startswith("{")
    assert image["content"]["type"] == "image"
    assert image["content"]["mimeType"] == "image/png"
    assert base64.b64decode(image["content"]["data"]).startswith(b"\x89PNG")
    content = tool_result_content(response)
    assert content.startswith(text["content"]["text"])
    size = len(base64.b64decode(image["content"]["data"]))
    assert content.endswith(f"\n[image/png image, {size:,} bytes]")
    echo = ToolCall(id="e", name="mcp__everything__echo", args={"message": "hi"})
    echoed = ToolCallResponse.from_result(echo, run(portal, servers, echo.name, echo.args))
    assert tool_result_content(echoed) == "Echo: hi"


def test_the_long_running_tool_reports_progress(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """Progress notifications from a TypeScript server reach context.progress."""
    messages: list[str] = []
    result = run(
        portal,
        servers,
        "mcp__everything__trigger-long-running-operation",
        {"duration": 0.6, "steps": 3},
        progress=messages.append,
    )
    assert "Long running operation completed" in model_response("l", result)["output"]
    assert sorted(messages) == ["1/3", "2/3", "3/3"]


def test_a_third_party_server_does_not_see_the_agents_secrets(
    portal: BlockingPortal, servers: McpServers
) -> None:
    """get-env shows the config's env and none of the agent's other variables."""
    result = run(portal, servers, "mcp__everything__get-env")
    env = json.loads(model_response("g", result)["output"])
    assert SECRET not in env
    assert env["TOOLBATCH_TEST_GIVEN"] == "from-config"
