"""Without an SDK, or without OpenTelemetry at all, telemetry does nothing and costs nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import Span, Tracer, TracerProvider

from toolbatch import (
    ConfigError,
    Registry,
    SchedulerConfig,
    ToolCall,
    ToolScheduler,
    telemetry,
    tool,
)
from toolbatch.hooks import PostToolBatchInput
from toolbatch.producers import ShellProducer

ROOT = Path(__file__).resolve().parents[2]


@tool
def turn_seen() -> str:
    """Whether a telemetry turn is current while the call runs."""
    return str(telemetry.current_turn() is not None)


async def test_without_an_sdk_no_turn_is_recorded(tmp_path: Path) -> None:
    """The API is installed but no provider is set: no turn, no spans, the batch as usual."""
    from opentelemetry import trace  # imported, so toolbatch looks at the (proxy) providers

    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    async with ToolScheduler(Registry([turn_seen]), SchedulerConfig(artifacts_dir=tmp_path)) as s:
        turn = await s.run_batch([ToolCall(id="t", name="turn_seen")])
    output = turn.responses[0].parts[0].function_response.response  # type: ignore[union-attr]
    assert output == {"output": "False"}


def test_configure_rejects_what_is_not_a_switch() -> None:
    """A bad value names itself and the fix."""
    with pytest.raises(ConfigError, match="enabled must be True or False, got 'no'"):
        telemetry.configure(enabled="no")  # type: ignore[arg-type]


BLOCKED_RUN = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class NoOpenTelemetry(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoOpenTelemetry())

    import anyio
    import toolbatch
    from toolbatch.hooks import CommandHook

    @toolbatch.tool
    def add(a: int, b: int) -> int:
        return a + b

    async def main():
        registry = toolbatch.default_registry()
        registry.register(add)
        answer = "printf '{\\"additionalContext\\": \\"%s\\"}' \\"${TRACEPARENT-unset}\\""
        hook = CommandHook(["bash", "-c", "cat > /dev/null; " + answer])
        config = toolbatch.SchedulerConfig(
            artifacts_dir=sys.argv[1], batch_budget=2000, hooks=[hook]
        )
        command = "seq 1 50000; echo ${TRACEPARENT-unset}"
        async with toolbatch.ToolScheduler(registry, config) as scheduler:
            turn = await scheduler.run_batch([
                toolbatch.ToolCall(id="a", name="add", args={"a": 2, "b": 3}),
                toolbatch.ToolCall(id="s", name="run_shell_command", args={"command": command}),
            ])
        print(json.dumps({
            "statuses": [r.status for r in turn.responses],
            "chars": turn.content_length,
            "context": turn.parts[-1].text,
            "shell_tail": turn.responses[1].parts[0].function_response.response["output"][-40:],
            "otel_loaded": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
        }))

    anyio.run(main)
    """
)


def test_without_opentelemetry_installed_everything_still_runs(tmp_path: Path) -> None:
    """With ``opentelemetry`` not importable, batches, shells, hooks and persistence work."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TOOLBATCH_STATE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, str(tmp_path / "artifacts")],
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert result["statuses"] == ["success", "success"]
    assert result["chars"] <= 2000
    assert result["context"] == "unset"
    assert "unset" in result["shell_tail"]
    assert result["otel_loaded"] == []
    assert list((tmp_path / "artifacts").iterdir())  # the big output was still persisted


class _BrokenTracer(Tracer):
    def start_span(self, *args: object, **kwargs: object) -> Span:
        raise RuntimeError("a broken SDK")

    def start_as_current_span(self, *args: object, **kwargs: object) -> Any:
        raise RuntimeError("a broken SDK")


class _BrokenProvider(TracerProvider):
    def get_tracer(self, *args: object, **kwargs: object) -> Tracer:
        return _BrokenTracer()


async def test_a_broken_sdk_never_breaks_a_batch(tmp_path: Path) -> None:
    """A tracer that raises: every call still answered, the budget kept, hooks run."""
    answers: list[int] = []

    async def count(batch: PostToolBatchInput) -> None:
        answers.append(len(batch.tool_calls))

    telemetry.configure(tracer_provider=_BrokenProvider())
    try:
        config = SchedulerConfig(artifacts_dir=tmp_path, batch_budget=1_000, hooks=[count])
        registry = Registry([turn_seen, ShellProducer()])
        async with ToolScheduler(registry, config) as scheduler:
            turn = await scheduler.run_batch(
                [
                    ToolCall(id="t", name="turn_seen"),
                    ToolCall(id="s", name="run_shell_command", args={"command": "seq 1 5000"}),
                ]
            )
    finally:
        telemetry.configure()
    assert [r.status for r in turn.responses] == ["success", "success"]
    assert turn.content_length <= 1_000
    assert answers == [2]
