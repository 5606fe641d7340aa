"""What the editor is shown for a call and what the model reads from a prompt."""

from __future__ import annotations

import pytest
from acp import resource_link_block, text_block
from acp.schema import EmbeddedResourceContentBlock, TextResourceContents

from toolbatch import ToolCall
from toolbatch.acp._updates import TITLE_CHARS, CallIds, prompt_text, tool_title


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
