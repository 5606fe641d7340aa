"""Every runtime: what the model receives is what is recorded, bounded, in call order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from toolbatch import (
    FunctionResponsePart,
    JsonlRecorder,
    ToolCall,
    load_session,
    parts_adapter,
    tool,
)
from toolbatch.agent import (
    AgentLoop,
    HeadlessRuntime,
    InteractiveRuntime,
    Message,
    ModelReply,
    ScriptedModel,
    SubagentTool,
    accept,
    history_from_transcript,
    speculate,
)
from toolbatch.finalize import response_text_length
from toolbatch.producers import ToolDeclaration
from toolbatch.scheduler import Registry, SchedulerConfig, ToolScheduler

BUDGET = 6_000


@tool(output_threshold=None)
async def blob(n: int, size: int = 8_000) -> str:
    """Return `size` characters tagged with n."""
    return (f"<{n}>" + "x" * size)[:size]


@tool(read_only=True)
async def peek(path: str) -> str:
    """Pretend to read a file."""
    return f"contents of {path}"


class Recording:
    """Wraps a model and keeps every history it was sent."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[list[Message]] = []

    async def respond(
        self, history: Sequence[Message], tools: Sequence[ToolDeclaration]
    ) -> ModelReply:
        self.sent.append(list(history))
        return await self.inner.respond(history, tools)


def _wire(parts: list[Any]) -> str:
    return json.dumps(parts_adapter.dump_python(parts, by_alias=True, exclude_none=True))


def _tool_messages_sent(model: Recording) -> list[str]:
    """Each tool message the model received, first time it saw it."""
    seen: list[str] = []
    for history in model.sent:
        for message in history:
            if message.role == "tool":
                wire = _wire(message.parts)
                if wire not in seen:
                    seen.append(wire)
    return seen


def _recorded_tool_turns(path: Path) -> list[str]:
    return [_wire(e.parts) for e in load_session(path) if e.type == "tool_turn"]


def _ids(parts: list[Any]) -> list[str]:
    return [p.function_response.id for p in parts if isinstance(p, FunctionResponsePart)]


SCRIPT: list[Any] = [
    [
        {"id": "a", "name": "blob", "args": {"n": 1}},
        {"id": "b", "name": "blob", "args": {"n": 2}},
        {"id": "a", "name": "blob", "args": {"n": 3}},  # repeated id in the same turn
        {"id": "c", "name": "no_such_tool", "args": {}},
    ],
    [
        {"id": "b", "name": "blob", "args": {"n": 4}},  # id answered in an earlier turn
        {"id": "d", "name": "blob", "args": {"n": 5, "size": 50}},
    ],
    "all done",
]


@pytest.fixture
def registry() -> Registry:
    return Registry([blob, peek])


@pytest.mark.parametrize(
    "runtime",
    [
        pytest.param(HeadlessRuntime(), id="headless"),
        pytest.param(InteractiveRuntime(), id="interactive"),
    ],
)
async def test_sent_equals_recorded_within_budget_in_order(
    tmp_path: Path, registry: Registry, runtime: Any
) -> None:
    """Each tool turn the model received is byte-identical to the recorded one and bounded."""
    transcript = tmp_path / "session.jsonl"
    model = Recording(ScriptedModel(SCRIPT))
    config = SchedulerConfig(artifacts_dir=tmp_path / "art", batch_budget=BUDGET)
    async with ToolScheduler(registry, config) as scheduler:
        loop = AgentLoop(model, scheduler, runtime=runtime, recorder=JsonlRecorder(transcript))
        outcome = await loop.prompt("go")
    assert outcome.text == "all done"
    assert outcome.stop_reason == "end_turn"
    sent = _tool_messages_sent(model)
    assert sent == _recorded_tool_turns(transcript)
    assert len(sent) == 2
    for turn in outcome.turns:
        assert response_text_length(turn.parts) <= BUDGET
    first, second = outcome.turns
    assert _ids(first.parts) == ["a", "b", "a", "c"]
    assert [r.status for r in first.responses] == ["success", "success", "duplicate", "error"]
    assert _ids(second.parts) == ["b", "d"]
    assert [r.status for r in second.responses] == ["duplicate", "success"]
    kinds = [e.kinds for e in load_session(transcript) if e.type == "tool_turn"]
    assert kinds[0][2] == "duplicate"
    assert kinds[1] == ["duplicate", "executed"]


async def test_headless_skips_calls_beyond_the_per_turn_limit(
    tmp_path: Path, registry: Registry
) -> None:
    """Calls past max_calls_per_turn get a skipped response in their place."""
    script: list[Any] = [[{"name": "peek", "args": {"path": f"f{i}"}} for i in range(4)], "ok"]
    async with ToolScheduler(registry, SchedulerConfig(artifacts_dir=tmp_path)) as scheduler:
        loop = AgentLoop(
            ScriptedModel(script), scheduler, runtime=HeadlessRuntime(max_calls_per_turn=2)
        )
        outcome = await loop.prompt("go")
    [turn] = outcome.turns
    assert [r.status for r in turn.responses] == ["success", "success", "skipped", "skipped"]


async def test_invalid_model_calls_get_synthetic_errors(tmp_path: Path, registry: Registry) -> None:
    """A call the model client could not parse is answered in place, not run."""

    class Garbled:
        calls = 0

        async def respond(
            self, history: Sequence[Message], tools: Sequence[ToolDeclaration]
        ) -> ModelReply:
            self.calls += 1
            if self.calls == 1:
                call = ToolCall(id="x", name="peek", args={})
                return ModelReply(tool_calls=[call], invalid_calls={"x": "arguments are not JSON"})
            return ModelReply(text="fine")

    async with ToolScheduler(registry, SchedulerConfig(artifacts_dir=tmp_path)) as scheduler:
        outcome = await AgentLoop(Garbled(), scheduler).prompt("go")
    [response] = outcome.turns[0].responses
    assert response.error_type == "invalid_args"
    assert "not JSON" in (response.error or "")


async def test_interactive_turn_cancelled_entirely_is_recorded_not_sent(
    tmp_path: Path,
) -> None:
    """When the user aborts every call, the turn is recorded and the model is not asked again."""
    started = anyio.Event()

    @tool
    async def slow() -> str:
        started.set()
        await anyio.sleep(3600)
        return "never"

    model = Recording(ScriptedModel([[{"name": "slow", "args": {}}], "unreachable"]))
    transcript = tmp_path / "s.jsonl"
    abort = anyio.Event()

    async def trigger() -> None:
        await started.wait()
        abort.set()

    async with (
        ToolScheduler(Registry([slow]), SchedulerConfig(artifacts_dir=tmp_path)) as scheduler,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(trigger)
        loop = AgentLoop(
            model, scheduler, runtime=InteractiveRuntime(), recorder=JsonlRecorder(transcript)
        )
        with anyio.fail_after(10):
            outcome = await loop.prompt("go", abort=abort)
    assert outcome.stop_reason == "cancelled"
    assert len(model.sent) == 1
    assert [e.responses[0].status for e in load_session(transcript) if e.type == "tool_turn"] == [
        "cancelled"
    ]


async def test_subagent_finalizes_its_turns_and_returns_its_answer(tmp_path: Path) -> None:
    """A child loop's tool turns are bounded; the parent receives the child's final answer."""
    child_models: list[Recording] = []

    def child_model() -> Recording:
        model = Recording(
            ScriptedModel([[{"name": "blob", "args": {"n": i}} for i in range(4)], "child says hi"])
        )
        child_models.append(model)
        return model

    child_config = SchedulerConfig(artifacts_dir=tmp_path / "child", batch_budget=3_000)
    agent = SubagentTool(model_factory=child_model, registry=Registry([blob]), config=child_config)
    parent = ScriptedModel([[{"name": "agent", "args": {"prompt": "do it"}}], "parent done"])
    async with ToolScheduler(
        Registry([agent]), SchedulerConfig(artifacts_dir=tmp_path)
    ) as scheduler:
        outcome = await AgentLoop(parent, scheduler).prompt("go")
    [turn] = outcome.turns
    [response] = turn.responses
    assert "child says hi" in json.dumps(response.parts[0].model_dump())
    [child] = child_models
    child_tool_messages = [m for h in child.sent for m in h if m.role == "tool"]
    assert child_tool_messages
    assert all(response_text_length(m.parts) <= 3_000 for m in child_tool_messages)


async def test_speculation_records_nothing_until_accepted(
    tmp_path: Path, registry: Registry
) -> None:
    """Discarded speculation leaves no record; accepted speculation records what the fork saw."""
    transcript = tmp_path / "s.jsonl"
    script: list[Any] = [
        "hello",
        [{"name": "peek", "args": {"path": "README"}}, {"name": "blob", "args": {"n": 1}}],
        "peeked",
    ]
    async with ToolScheduler(registry, SchedulerConfig(artifacts_dir=tmp_path)) as scheduler:
        model = Recording(ScriptedModel(script))
        loop = AgentLoop(model, scheduler, recorder=JsonlRecorder(transcript))
        await loop.prompt("hi")
        before = transcript.read_bytes()
        spec = await speculate(loop, "read the readme")
        assert transcript.read_bytes() == before
        [turn] = spec.turns
        assert [r.status for r in turn.responses] == ["success", "skipped"]
        await accept(loop, spec)
    sent = _tool_messages_sent(model)
    assert sent == _recorded_tool_turns(transcript)
    assert [e.type for e in load_session(transcript)] == [
        "message",
        "message",
        "message",
        "message",
        "tool_turn",
        "message",
    ]


async def test_resume_after_a_crash_continues_from_the_record(
    tmp_path: Path, registry: Registry
) -> None:
    """A crash right after a tool turn was recorded loses nothing; a new loop continues."""
    transcript = tmp_path / "s.jsonl"

    class CrashAfterTools:
        def __init__(self) -> None:
            self.inner = ScriptedModel([[{"id": "t1", "name": "blob", "args": {"n": 1}}]])

        async def respond(
            self, history: Sequence[Message], tools: Sequence[ToolDeclaration]
        ) -> ModelReply:
            if history[-1].role == "tool":
                raise RuntimeError("process killed")
            return await self.inner.respond(history, tools)

    config = SchedulerConfig(artifacts_dir=tmp_path / "art", batch_budget=BUDGET)
    async with ToolScheduler(registry, config) as scheduler:
        loop = AgentLoop(CrashAfterTools(), scheduler, recorder=JsonlRecorder(transcript))
        with pytest.raises(RuntimeError, match="process killed"):
            await loop.prompt("go")
        crashed_tool_parts = _wire(loop.history[-1].parts)
    # Simulate the crash tearing the next append.
    with transcript.open("ab") as handle:
        handle.write(b'{"type":"message","role":"mo')
    resumed_model = Recording(ScriptedModel(["resumed fine"]))
    async with ToolScheduler(registry, config) as scheduler:
        history = history_from_transcript(transcript)
        loop = AgentLoop(
            resumed_model, scheduler, recorder=JsonlRecorder(transcript), history=history
        )
        outcome = await loop.prompt(None)
    assert outcome.text == "resumed fine"
    assert _wire(resumed_model.sent[0][-1].parts) == crashed_tool_parts
    assert [e.type for e in load_session(transcript)][-1] == "message"


async def test_old_format_transcript_resumes(tmp_path: Path, registry: Registry) -> None:
    """A transcript from before seq/kind/persisted_output_files existed still resumes."""
    transcript = tmp_path / "old.jsonl"
    records = [
        {"type": "message", "role": "user", "parts": [{"text": "earlier"}]},
        {
            "type": "message",
            "role": "model",
            "parts": [],
            "tool_calls": [{"id": "o1", "name": "peek", "args": {"path": "x"}}],
        },
        {
            "type": "tool_turn",
            "parts": [
                {"functionResponse": {"id": "o1", "name": "peek", "response": {"output": "old"}}}
            ],
            "responses": [{"call_id": "o1", "name": "peek", "part_count": 1}],
        },
    ]
    transcript.write_text("".join(json.dumps(r) + "\n" for r in records))
    model = Recording(ScriptedModel(["continuing"]))
    async with ToolScheduler(registry, SchedulerConfig(artifacts_dir=tmp_path)) as scheduler:
        loop = AgentLoop(model, scheduler, history=history_from_transcript(transcript))
        outcome = await loop.prompt("next")
    assert outcome.text == "continuing"
    assert [m.role for m in model.sent[0]] == ["user", "model", "tool", "user"]


async def test_send_guard_bounds_a_tool_message_that_bypassed_the_assembler(
    tmp_path: Path, registry: Registry
) -> None:
    """A raw, unbounded tool message appended by hand is capped at the send boundary."""
    model = Recording(ScriptedModel(["ok"]))
    async with ToolScheduler(
        registry, SchedulerConfig(artifacts_dir=tmp_path, batch_budget=1_000)
    ) as scheduler:
        loop = AgentLoop(model, scheduler)
        raw = parts_adapter.validate_python(
            [
                {
                    "functionResponse": {
                        "id": "r",
                        "name": "blob",
                        "response": {"output": "y" * 50_000},
                    }
                }
            ]
        )
        loop.history.append(Message(role="tool", parts=raw))
        with capture_logs() as logs:
            await loop.prompt(None)
    assert response_text_length(model.sent[0][-1].parts) <= 1_000
    assert any("guard" in str(entry.get("event")) for entry in logs)


async def test_scripted_model_never_reuses_an_id_from_the_history() -> None:
    """A resumed scripted session numbers new calls past the recorded ones."""
    from toolbatch import TextPart

    recorded = Message(
        role="model", parts=[], tool_calls=[ToolCall(id="call-1", name="run_shell_command")]
    )
    prompt = Message(role="user", parts=[TextPart(text="$ echo again")])
    reply = await ScriptedModel().respond([recorded, prompt], [])
    assert [c.id for c in reply.tool_calls] == ["call-2"]
