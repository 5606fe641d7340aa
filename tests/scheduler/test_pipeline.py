"""The one turn pipeline: execute once, complete once, hooks that never eat a result.

Each test is a case from the turn-pipeline issue, through the public API.
"""

from __future__ import annotations

import base64
import json
import math
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.providers._samples import png
from toolbatch import (
    ArtifactStore,
    ConfigError,
    FileData,
    FileDataPart,
    FunctionResponse,
    FunctionResponsePart,
    InlineData,
    InlineDataPart,
    JsonlRecorder,
    Part,
    Registry,
    SchedulerConfig,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolDeclaration,
    ToolResult,
    ToolScheduler,
    load_session,
    parts_adapter,
    tool,
)
from toolbatch.agent import AgentLoop, HeadlessRuntime, Message, ModelReply, ScriptedModel
from toolbatch.finalize import TRUNCATION_HEADER, finalize_tool_responses
from toolbatch.hooks import (
    CommandHook,
    EventHook,
    PostToolBatchInput,
    PostToolBatchOutput,
    PostToolUseInput,
)
from toolbatch.producers import ProducerContext

PNG = png(16, 16, noise=True)
HOSTILE_MEDIA = {
    "png-then-text": b"\x89PNG\r\n\x1a\n" + b"just text. " * 55_000,
    "png-with-text-tail": PNG + b"just text. " * 55_000,
    "bm-text": b"BM" + b"bitmap? no, text. " * 50_000,
    "id3-text": b"ID3" + b"audio? no, text. " * 53_000,
    "long-mime": PNG,
    "long-uri": b"",
    "bad-file-mime": b"",
}
"""Media parts built to pass a signature check or to carry text in their strings."""


@tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


@tool(output_threshold=None)
async def flood(n: int) -> str:
    """n characters of output (no generic persistence: the finalizer must cut it)."""
    return "".join(f"line {i}\n" for i in range(n))


@tool
def quits(code: int = 2) -> str:
    """Exits the process, as an argparse error would."""
    sys.exit(code)


@tool
async def interrupts() -> str:
    """Raises KeyboardInterrupt inside the tool."""
    raise KeyboardInterrupt


class Structured:
    """A custom producer whose response is structured, with another key beside it."""

    declaration = ToolDeclaration(name="structured", description="rows as JSON")

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        rows = [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(5_000)]
        body = {"output": {"rows": rows}, "summary": "x" * 2_000}
        part = FunctionResponsePart(
            function_response=FunctionResponse(id=call.id, name=call.name, response=body)
        )
        return ToolResult(content=[part])


class Media:
    """A custom producer returning one inline part of a given label and bytes."""

    declaration = ToolDeclaration(
        name="media",
        input_schema={
            "type": "object",
            "properties": {"mime": {"type": "string"}, "kind": {"type": "string"}},
        },
    )

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        kind = call.args.get("kind")
        if kind == "text":
            data = base64.b64encode(("lorem ipsum " * 200_000).encode()).decode()
        elif kind == "big":
            data = base64.b64encode(png(1400, 1400, level=0)).decode()  # 5.9 MB
        elif kind in HOSTILE_MEDIA:
            data = base64.b64encode(HOSTILE_MEDIA[kind]).decode()
        elif kind == "broken":
            data = "not base64 at all!" * 1_000
        else:
            data = base64.b64encode(PNG).decode()
        mime = str(call.args.get("mime", "image/png"))
        if kind == "long-mime":
            mime = "image/png" + "x" * 2_000_000
        part: Part = InlineDataPart(inline_data=InlineData(mime_type=mime, data=data))
        if kind in ("long-uri", "bad-file-mime"):
            uri = "gs://bucket/" + "u" * 2_000_000 if kind == "long-uri" else "gs://bucket/a.png"
            file_mime = "image/png" if kind == "long-uri" else "image/png;" + "p" * 2_000_000
            part = FileDataPart(file_data=FileData(mime_type=file_mime, file_uri=uri))
        return ToolResult(content=[TextPart(text=f"{kind} media"), part])


def _registry() -> Registry:
    return Registry([echo, flood, quits, interrupts, Structured(), Media()])


def _config(tmp_path: Path, **options: Any) -> SchedulerConfig:
    return SchedulerConfig(artifacts_dir=tmp_path / "artifacts", **options)


def _body(response: ToolCallResponse) -> dict[str, Any]:
    part = response.parts[0]
    assert isinstance(part, FunctionResponsePart)
    return dict(part.function_response.response)


def _read(path: Path) -> str:
    return path.read_text()


def _read_bytes(path: Path) -> bytes:
    return path.read_bytes()


def _hook_script(tmp_path: Path, body: str) -> CommandHook:
    path = tmp_path / "hook.py"
    path.write_text("import json, sys\n" + textwrap.dedent(body))
    return CommandHook([sys.executable, str(path)])


class Recording:
    """An observer that writes down every event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.slow_started = anyio.Event()

    def call_started(self, call: ToolCall) -> None:
        self.events.append(("started", call.id))
        if call.name == "slow":
            self.slow_started.set()

    def call_progress(self, call: ToolCall, message: str) -> None:
        del call, message

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        self.events.append(("finished", call.id))


# -- execute, then complete once -------------------------------------------------------------------


async def test_execute_answers_every_call_in_order_and_bounds_nothing(tmp_path: Path) -> None:
    """execute returns one unbounded response per call, in order, bad calls answered in place."""
    calls = [
        ToolCall(id="big", name="flood", args={"n": 20_000}),
        ToolCall(id="u", name="no_such_tool"),
        ToolCall(id="i", name="echo", invalid="arguments are not valid JSON: '{'"),
        ToolCall(id="big", name="echo", args={"text": "again"}),
    ]
    async with ToolScheduler(_registry(), _config(tmp_path, batch_budget=1_000)) as scheduler:
        responses = await scheduler.execute(calls)
    assert [r.call_id for r in responses] == ["big", "u", "i", "big"]
    assert responses[0].content_length > 100_000  # nothing is finalized by execute
    assert [r.error_type for r in responses[1:]] == [
        "unknown_tool",
        "invalid_args",
        "duplicate_call",
    ]
    assert "arguments are not valid JSON" in str(responses[2].error)


async def test_hooks_see_the_whole_merged_turn_once(tmp_path: Path) -> None:
    """In an agent runtime the hook sees executed, duplicate, skipped and invalid calls, once."""
    seen: list[list[str]] = []

    async def hook(batch: PostToolBatchInput) -> None:
        seen.append([f"{c.tool_use_id}:{c.status}" for c in batch.tool_calls])

    script = [
        [{"id": "a", "name": "echo", "args": {"text": "1"}}],
        [
            {"id": "a", "name": "echo", "args": {"text": "dup"}},
            {"id": "b", "name": "echo", "args": {"text": "2"}},
            {"id": "c", "name": "echo", "args": {"text": "3"}},
            ToolCall(id="d", name="echo", invalid="arguments are not an object"),
        ],
        "done",
    ]
    config = _config(tmp_path, hooks=[hook])
    async with ToolScheduler(_registry(), config) as scheduler:
        loop = AgentLoop(
            ScriptedModel(script), scheduler, runtime=HeadlessRuntime(max_calls_per_turn=1)
        )
        await loop.prompt("go")
    assert seen == [["a:success"], ["a:duplicate", "b:success", "c:skipped", "d:error"]]


# -- hooks never eat a result ----------------------------------------------------------------------


async def test_a_blocking_hook_keeps_the_output_and_its_artifact(tmp_path: Path) -> None:
    """Exit 2 keeps the cut output and the path of its file; the reason is the last part."""
    hook = _hook_script(tmp_path, 'sys.stdin.read(); sys.stderr.write("tests fail"); sys.exit(2)')
    calls = [ToolCall(id="big", name="flood", args={"n": 20_000})]
    config = _config(tmp_path, batch_budget=2_000, hooks=[hook])
    async with ToolScheduler(_registry(), config) as scheduler:
        turn = await scheduler.run_batch(calls)
    output = str(_body(turn.responses[0])["output"])
    assert output.startswith(TRUNCATION_HEADER)
    [path] = turn.responses[0].persisted_output_files or ()
    assert f"Full output: {path}" in output
    assert _read(path).count("\n") == 20_000
    assert turn.stop_reason == "tests fail"
    last = turn.parts[-1]
    assert isinstance(last, TextPart)
    assert last.text.endswith("tests fail")
    assert turn.content_length <= 2_000


async def test_a_block_decision_stops_the_agent_loop_after_recording(tmp_path: Path) -> None:
    """decision: block ends the prompt without asking the model again; the turn is recorded."""
    hook = _hook_script(
        tmp_path, 'sys.stdin.read(); print(json.dumps({"decision": "block", "reason": "stop"}))'
    )
    script = [[{"id": "a", "name": "echo", "args": {"text": "hi"}}], "never asked"]
    transcript = tmp_path / "t.jsonl"
    config = _config(tmp_path, hooks=[hook], recorder=JsonlRecorder(transcript))
    model = ScriptedModel(script)
    async with ToolScheduler(_registry(), config) as scheduler:
        outcome = await AgentLoop(model, scheduler).prompt("go")
    assert outcome.stop_reason == "hook_stop"
    assert outcome.hook_reason == "stop"
    assert len(outcome.replies) == 1
    [turn] = [entry for entry in load_session(transcript) if entry.type == "tool_turn"]
    assert turn.stop_reason == "stop"
    assert _body(turn.responses[0]) == {"output": "hi"}


async def test_additional_context_is_its_own_part_and_never_attributed_to_a_tool(
    tmp_path: Path,
) -> None:
    """A 7-character echo stays exactly itself; the context is the batch's own text part."""

    async def hook(batch: PostToolBatchInput) -> PostToolBatchOutput:
        return PostToolBatchOutput(additional_context="lint: 3 warnings")

    async with ToolScheduler(_registry(), _config(tmp_path, hooks=[hook])) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="e", name="echo", args={"text": "hello!!"})])
    assert _body(turn.responses[0]) == {"output": "hello!!"}
    assert turn.responses[0].persisted_output_files is None
    assert turn.context_parts == [TextPart(text="lint: 3 warnings")]


def _cut(output: str) -> tuple[str, str]:
    """A preview's head (its header and ``Full output`` line included) and its tail."""
    head, _, rest = output.partition("\n[... ")
    return head, rest.split(" omitted ...]\n", 1)[1]


async def test_hooks_see_each_result_bounded_and_the_model_gets_what_was_recorded(
    tmp_path: Path,
) -> None:
    """A hook that adds context: the model gets a result the hook saw, or a shorter cut of
    it (same file, head and tail from the hook's), and exactly what was recorded."""
    seen: dict[str, str] = {}
    context = "".join(f"lint {i}: unused import\n" for i in range(100))

    async def hook(batch: PostToolBatchInput) -> PostToolBatchOutput:
        for call in batch.tool_calls:
            body: Any = call.tool_response.parts[0]["functionResponse"]
            seen[call.tool_use_id] = body["response"]["output"]
        return PostToolBatchOutput(additional_context=context)

    transcript = tmp_path / "t.jsonl"
    script = [
        [
            {"id": "big", "name": "flood", "args": {"n": 20_000}},
            {"id": "small", "name": "echo", "args": {"text": "hello"}},
        ],
        "done",
    ]
    model = Capturing()
    config = _config(tmp_path, batch_budget=4_000, hooks=[hook], recorder=JsonlRecorder(transcript))
    async with ToolScheduler(_registry(), config) as scheduler:
        loop = AgentLoop(ScriptedModel(script), scheduler)
        outcome = await loop.prompt("go")
        await AgentLoop(model, scheduler, history=loop.history).prompt("next")
    [turn] = outcome.turns
    hook_big, hook_small = seen["big"], seen["small"]
    sent_big, sent_small = (str(_body(r)["output"]) for r in turn.responses)
    # The hook saw every result bounded: the whole batch within the budget.
    assert len(hook_big) + len(hook_small) <= 4_000
    assert len(hook_big) > 3_000
    # Its context had to fit too: the model got the big result shorter than the hook saw it,
    # cut again from what the hook saw (one header, the same file), the small one unchanged.
    assert len(sent_big) < len(hook_big) - 1_000
    assert sent_small == hook_small == "hello"
    [path] = turn.responses[0].persisted_output_files or ()
    (hook_head, hook_tail), (sent_head, sent_tail) = _cut(hook_big), _cut(sent_big)
    assert sent_head.startswith(f"{TRUNCATION_HEADER}\nFull output: {path}\n")
    assert hook_head.startswith(sent_head)
    assert hook_tail.endswith(sent_tail)
    assert sent_big.count(TRUNCATION_HEADER) == 1
    assert turn.content_length <= 4_000
    # What was recorded is what the model received, context part included.
    [recorded] = [e for e in load_session(transcript) if e.type == "tool_turn"]
    assert recorded.parts == turn.parts
    assert model.tool_messages == [turn.parts]
    assert isinstance(turn.parts[-1], TextPart)
    assert turn.parts[-1].text.startswith(TRUNCATION_HEADER)


async def test_per_call_hooks_see_the_producers_result_and_batch_hooks_see_it_bounded(
    tmp_path: Path,
) -> None:
    """PostToolUse runs on the result as its producer returned it, its input cut to the
    session's budget (with a marker); PostToolBatch on the result within the batch budget."""
    per_call: list[int] = []
    per_batch: list[int] = []

    def post_tool_use(event: PostToolUseInput) -> None:
        per_call.append(len(str(event.tool_response["output"])))

    async def post_tool_batch(batch: PostToolBatchInput) -> None:
        per_batch.extend(call.tool_response.content_length for call in batch.tool_calls)

    hooks = [EventHook("PostToolUse", post_tool_use), post_tool_batch]
    config = _config(tmp_path, batch_budget=4_000, hooks=hooks)
    async with ToolScheduler(_registry(), config) as scheduler:
        await scheduler.run_batch([ToolCall(id="big", name="flood", args={"n": 20_000})])
    whole = len("".join(f"line {i}\n" for i in range(20_000)))
    assert len(per_call) == 1
    assert 1_000 < per_call[0] <= 4_000 < whole  # bounded, head and tail kept
    assert per_batch[0] <= 4_000


async def test_oversized_context_is_bounded_and_persisted_on_its_own(tmp_path: Path) -> None:
    """Context over the budget is cut with one header; its file holds the whole context."""
    context = "".join(f"warning {i}: unused import\n" for i in range(5_000))

    async def hook(batch: PostToolBatchInput) -> PostToolBatchOutput:
        return PostToolBatchOutput(additional_context=context)

    calls = [ToolCall(id="big", name="flood", args={"n": 20_000})]
    config = _config(tmp_path, batch_budget=3_000, hooks=[hook])
    async with ToolScheduler(_registry(), config) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert turn.content_length <= 3_000
    [part] = turn.context_parts
    assert isinstance(part, TextPart)
    assert part.text.count(TRUNCATION_HEADER) == 1
    output = str(_body(turn.responses[0])["output"])
    assert output.count(TRUNCATION_HEADER) == 1
    context_file = Path(part.text.split("Full output: ")[1].split("\n")[0])
    assert _read(context_file) == context
    assert context_file not in (turn.responses[0].persisted_output_files or ())
    assert context_file.name.startswith("hook-text-")  # the turn's own text, not a tool's


async def test_a_replacement_is_bounded_like_any_result(tmp_path: Path) -> None:
    """A hook that replaces a response with 300,000 characters is still within budget."""

    async def hook(batch: PostToolBatchInput) -> PostToolBatchOutput:
        huge = ToolCallResponse(
            call_id="e",
            name="echo",
            parts=[
                FunctionResponsePart(
                    function_response=FunctionResponse(
                        id="e", name="echo", response={"output": {"blob": "y" * 300_000}}
                    )
                )
            ],
        )
        return PostToolBatchOutput(replace={"e": huge})

    config = _config(tmp_path, batch_budget=1_000, hooks=[hook])
    async with ToolScheduler(_registry(), config) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="e", name="echo", args={"text": "x"})])
    assert turn.content_length <= 1_000
    assert len(json.dumps([p.model_dump(by_alias=True) for p in turn.parts])) < 2_000


# -- every model-facing value counts ---------------------------------------------------------------


async def test_structured_output_and_other_keys_are_counted_cut_and_kept(tmp_path: Path) -> None:
    """A structured output with another key under a budget of 1,000: within budget, the
    output a string preview of its JSON, the other key folded in, the whole JSON on disk."""
    async with ToolScheduler(_registry(), _config(tmp_path, batch_budget=1_000)) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="s", name="structured")])
    response = turn.responses[0]
    assert turn.content_length <= 1_000
    assert response.content_length == turn.content_length
    body = _body(response)
    assert set(body) == {"output"}
    assert str(body["output"]).startswith(TRUNCATION_HEADER)
    [path] = response.persisted_output_files or ()
    saved = _read(path)
    rows, _, summary = saved.partition("\n")
    assert len(json.loads(rows)["rows"]) == 5_000
    assert json.loads(summary) == {"summary": "x" * 2_000}


def test_content_length_is_always_derived_from_the_parts() -> None:
    """A content_length given (even a wrong one) is ignored: it follows the parts."""
    part = {"functionResponse": {"id": "a", "name": "t", "response": {"output": "abc", "n": 1}}}
    response = ToolCallResponse.model_validate(
        {"call_id": "a", "name": "t", "parts": [part], "content_length": 5}
    )
    assert response.content_length == len("abc") + 1 + len('{"n":1}')
    assert response.model_dump()["content_length"] == response.content_length
    shorter = response.with_parts([TextPart(text="xy")])
    assert shorter.content_length == 2


# -- the model boundary ----------------------------------------------------------------------------


class Capturing:
    """A model that records every tool message it is sent, then ends the turn."""

    def __init__(self) -> None:
        self.tool_messages: list[list[Any]] = []

    async def respond(
        self, history: Sequence[Message], tools: Sequence[ToolDeclaration]
    ) -> ModelReply:
        self.tool_messages = [m.parts for m in history if m.role == "tool"]
        return ModelReply(text="ok")


async def test_the_model_boundary_guards_every_tool_message_every_time(tmp_path: Path) -> None:
    """Tool messages that skipped completion are capped on this request and the next."""

    def unbounded(call_id: str) -> Message:
        return Message(
            role="tool",
            parts=[
                FunctionResponsePart(
                    function_response=FunctionResponse(
                        id=call_id, name="t", response={"output": "z" * 100_000}
                    )
                )
            ],
        )

    history = [
        Message(role="user", parts=[TextPart(text="hi")]),
        Message(role="model", parts=[], tool_calls=[ToolCall(id="a", name="t")]),
        unbounded("a"),
        Message(role="model", parts=[], tool_calls=[ToolCall(id="b", name="t")]),
        unbounded("b"),
    ]
    model = Capturing()
    async with ToolScheduler(_registry(), _config(tmp_path, batch_budget=5_000)) as scheduler:
        loop = AgentLoop(model, scheduler, history=history)
        for _ in range(2):
            await loop.prompt("again")
            assert len(model.tool_messages) == 2
            for parts in model.tool_messages:
                output = parts[0].function_response.response["output"]
                assert len(output) <= 5_000


# -- one budget value ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "budget",
    [
        pytest.param(0, id="zero"),
        pytest.param(-5, id="negative"),
        pytest.param(0.5, id="fraction"),
        pytest.param(math.nan, id="nan"),
        pytest.param(True, id="bool"),
        pytest.param("1000", id="string"),
        pytest.param(1000.0, id="whole-float"),
    ],
)
async def test_a_bad_budget_is_refused_where_it_enters(tmp_path: Path, budget: object) -> None:
    """SchedulerConfig and run_batch refuse it, naming the value; nothing runs."""
    with pytest.raises(ConfigError, match=repr(budget).replace("(", r"\(")):
        SchedulerConfig(batch_budget=budget)  # type: ignore[arg-type]
    async with ToolScheduler(_registry(), _config(tmp_path)) as scheduler:
        with pytest.raises(ConfigError, match="budget"):
            await scheduler.run_batch(
                [ToolCall(id="e", name="echo", args={"text": "x"})], budget=budget
            )  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [None, math.inf])
async def test_none_and_infinity_mean_no_budget(tmp_path: Path, budget: object) -> None:
    """No budget: a 100,000 character output is sent whole."""
    config = _config(tmp_path, batch_budget=budget)
    assert config.batch_budget is None
    async with ToolScheduler(_registry(), config) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="f", name="flood", args={"n": 10_000})])
    assert not str(_body(turn.responses[0])["output"]).startswith(TRUNCATION_HEADER)


# -- the observer ----------------------------------------------------------------------------------


async def test_every_call_is_reported_exactly_once(tmp_path: Path) -> None:
    """Started then finished, once each: run, unknown, invalid, duplicate, denied, aborted."""

    @tool(needs_permission=True)
    async def guarded() -> str:
        """Needs permission."""
        return "ran"

    @tool
    async def slow() -> str:
        """Waits for the abort."""
        await anyio.sleep(60)
        return "late"

    async def deny(call: ToolCall, declaration: ToolDeclaration) -> bool:
        return False

    registry = Registry([echo, guarded, slow])
    calls = [
        ToolCall(id="ok", name="echo", args={"text": "x"}),
        ToolCall(id="u", name="nope"),
        ToolCall(id="i", name="echo", invalid="bad JSON"),
        ToolCall(id="ok", name="echo", args={"text": "y"}),
        ToolCall(id="g", name="guarded"),
        ToolCall(id="s", name="slow"),
    ]
    observer = Recording()
    abort = anyio.Event()

    async def abort_soon() -> None:
        await observer.slow_started.wait()
        abort.set()

    async with (
        ToolScheduler(registry, _config(tmp_path)) as scheduler,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(abort_soon)
        responses = await scheduler.execute(calls, abort=abort, observer=observer, approve=deny)
    assert [r.status for r in responses] == [
        "success",
        "error",
        "error",
        "duplicate",
        "error",
        "cancelled",
    ]
    for call_id in ("ok", "u", "i", "g", "s"):
        mine = [kind for kind, who in observer.events if who == call_id]
        expected = 2 if call_id != "ok" else 4  # two calls share the id "ok"
        assert mine == ["started", "finished"] * (expected // 2)


# -- nothing a tool does escapes -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["quits", "interrupts"])
async def test_sys_exit_or_keyboard_interrupt_in_a_tool_is_its_error(
    tmp_path: Path, name: str
) -> None:
    """The batch completes and is recorded; the tool's response says what it raised."""
    transcript = tmp_path / "t.jsonl"
    config = _config(tmp_path, recorder=JsonlRecorder(transcript))
    calls = [ToolCall(id="x", name=name), ToolCall(id="e", name="echo", args={"text": "fine"})]
    async with ToolScheduler(_registry(), config) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert turn.responses[0].status == "error"
    assert "SystemExit" in str(turn.responses[0].error) or "KeyboardInterrupt" in str(
        turn.responses[0].error
    )
    assert _body(turn.responses[1]) == {"output": "fine"}
    [recorded] = load_session(transcript)
    assert [r.call_id for r in recorded.responses] == ["x", "e"]


# -- persistence has a deadline --------------------------------------------------------------------


class HangingStore(ArtifactStore):
    """A store whose persist never returns."""

    async def persist(self, call_id: str, tool_name: str, text: str) -> Path:
        await anyio.sleep_forever()
        raise AssertionError


async def test_a_store_that_never_answers_does_not_block_the_batch(tmp_path: Path) -> None:
    """Past the persistence deadline the batch is cut without a file reference, in budget."""
    big = ToolCallResponse.from_result(ToolCall(id="a", name="t"), ToolResult(content="q" * 50_000))
    store = HangingStore(tmp_path / "s")
    with anyio.fail_after(10):
        [out] = await finalize_tool_responses(
            [big], budget=1_000, store=store, persist_timeout_s=0.3
        )
    assert out.persisted_output_files == ()
    assert out.content_length <= 1_000
    assert "Full output" not in str(_body(out)["output"])


# -- media are checked, not trusted ----------------------------------------------------------------


async def test_text_labelled_as_an_image_is_counted_as_text(tmp_path: Path) -> None:
    """2.4 MB of text labelled image/png under a budget of 1,000: sent as cut text."""
    async with ToolScheduler(_registry(), _config(tmp_path, batch_budget=1_000)) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="m", name="media", args={"kind": "text"})])
    assert not any(isinstance(p, InlineDataPart) for p in turn.parts)
    assert turn.content_length <= 1_000
    assert len(json.dumps([p.model_dump(by_alias=True) for p in turn.parts])) < 2_000


@pytest.mark.parametrize(
    ("kind", "mime", "reason"),
    [
        pytest.param("big", "image/png", "larger than", id="oversized-image"),
        pytest.param("png", "application/octet-stream", "not an image or audio", id="binary"),
    ],
)
async def test_media_that_cannot_go_inline_is_saved_and_referenced(
    tmp_path: Path, kind: str, mime: str, reason: str
) -> None:
    """An image over the per-part cap, or binary that is not media, becomes a reference."""
    async with ToolScheduler(_registry(), _config(tmp_path)) as scheduler:
        turn = await scheduler.run_batch(
            [ToolCall(id="m", name="media", args={"kind": kind, "mime": mime})]
        )
    assert not any(isinstance(p, InlineDataPart) for p in turn.parts)
    # The reference is part of the call's own result, after its output.
    output = str(_body(turn.responses[0])["output"])
    first, reference = output.split("\n", 1)
    assert first == f"{kind} media"
    assert reason in reference
    path = Path(reference.split("saved at ")[1].rstrip("]"))
    assert _read_bytes(path).startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("kind", "mime"),
    [
        pytest.param("png-then-text", "image/png", id="png-signature-then-600kb-text"),
        pytest.param("png-with-text-tail", "image/png", id="real-png-then-600kb-text"),
        pytest.param("bm-text", "image/bmp", id="900kb-text-starting-BM"),
        pytest.param("id3-text", "audio/mpeg", id="900kb-text-starting-ID3"),
        pytest.param("long-mime", "image/png", id="2m-char-mime-type"),
        pytest.param("long-uri", "image/png", id="2m-char-file-uri"),
        pytest.param("bad-file-mime", "image/png", id="2m-char-file-mime-type"),
    ],
)
async def test_hostile_media_is_not_media_and_stays_in_budget(
    tmp_path: Path, kind: str, mime: str
) -> None:
    """A part is media only when its bytes are the format it claims and its strings are short:
    else what it carries is counted, cut to the budget, and no mapping sends it as media."""
    from toolbatch.providers import anthropic, gemini, openai_chat, openai_responses

    async with ToolScheduler(_registry(), _config(tmp_path, batch_budget=10_000)) as scheduler:
        turn = await scheduler.run_batch(
            [ToolCall(id="m", name="media", args={"kind": kind, "mime": mime})]
        )
    assert not any(isinstance(p, InlineDataPart | FileDataPart) for p in turn.parts)
    assert turn.content_length <= 10_000
    wire = json.dumps(parts_adapter.dump_python(turn.parts, by_alias=True, exclude_none=True))
    assert len(wire) < 12_000, "a media string escaped the budget"
    for mapping in (anthropic, gemini, openai_chat, openai_responses):
        request = json.dumps(mapping.tool_results(turn))
        assert len(request) < 12_000, mapping.__name__
        assert "inlineData" not in request
        assert "image_url" not in request
    assert "not" in str(_body(turn.responses[0])["output"])  # says why it is not media


async def test_invalid_base64_is_treated_as_text(tmp_path: Path) -> None:
    """Media whose data does not decode is text, counted and bounded."""
    async with ToolScheduler(_registry(), _config(tmp_path, batch_budget=500)) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="m", name="media", args={"kind": "broken"})])
    assert not any(isinstance(p, InlineDataPart) for p in turn.parts)
    assert turn.content_length <= 500


async def test_real_media_stays_inline_and_is_saved_once(tmp_path: Path) -> None:
    """A small PNG is sent as it is; its bytes are on disk once, for APIs that need a file."""
    async with ToolScheduler(_registry(), _config(tmp_path)) as scheduler:
        turn = await scheduler.run_batch([ToolCall(id="m", name="media", args={"kind": "png"})])
        [image] = [p for p in turn.parts if isinstance(p, InlineDataPart)]
        assert base64.b64decode(image.inline_data.data) == PNG
        saved = image.inline_data.persisted_file
        assert saved is not None
        assert _read_bytes(saved) == PNG
        assert "persisted_file" not in json.dumps(image.model_dump(by_alias=True))
        again = await scheduler.complete_turn(turn.responses)
        [same] = [p for p in again.parts if isinstance(p, InlineDataPart)]
        assert same.inline_data.persisted_file == saved
        assert scheduler.store.written.count(saved) == 1


async def test_a_producer_preview_cut_again_keeps_one_header_its_path_and_its_end(
    tmp_path: Path,
) -> None:
    """Shell and generic previews under a smaller share: one format, one header, same file."""
    from toolbatch.producers import ShellProducer

    text = "".join(f"row {i}\n" for i in range(20_000))
    calls = [
        ToolCall(id="sh", name="run_shell_command", args={"command": "seq 1 100000; exit 3"}),
        ToolCall(id="py", name="echo", args={"text": text}),
    ]
    registry = Registry([echo, ShellProducer()])
    async with ToolScheduler(registry, _config(tmp_path, batch_budget=1_500)) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert turn.content_length <= 1_500
    shell, python = (str(_body(response)["output"]) for response in turn.responses)
    for response, output in zip(turn.responses, (shell, python), strict=True):
        [path] = response.persisted_output_files or ()
        assert output.startswith(f"{TRUNCATION_HEADER}\nFull output: {path}\n")
        assert output.count(TRUNCATION_HEADER) == 1
        assert output.count("omitted ...]") == 1
    assert shell.endswith("\n99999\n100000\n[exit code: 3]")
    assert " bytes omitted ...]\n" in shell
    assert python.endswith("row 19999\n")
    assert _read(turn.responses[1].persisted_output_files[0]) == text  # type: ignore[index]
