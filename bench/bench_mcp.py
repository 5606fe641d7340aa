"""Issue 5: the MCP producer against the SDK's own stdio client, side by side in one run.

* A large tool result (50 MB; 20 MB with ``--quick``) from the test server's ``big_text``:
  through ``McpToolProducer.run`` (linear stdio transport, transform, persisted to a real
  artifact store) versus ``mcp.client.stdio.stdio_client`` + ``ClientSession.call_tool``,
  whose line reassembly is quadratic. Both read the same server; ours does more work.
* Echo round-trip latency: the producer versus a bare ``ClientSession.call_tool`` over the
  SDK's transport, on two live sessions, one call of each in turn (a diagnostic).
* Issue 33's echo row: one echo call as a whole batch through ``ToolScheduler.run_batch``
  (scheduler, hooks, finalizer: what an agent pays per MCP call) against a bare
  ``ClientSession.call_tool`` on another live session of the same server, one of each in
  turn (target: at most 1.05x; issue 18 asked 1.1x).
* Issue 18's memory row: one 200 MB text result (``texts``) through ``run_batch`` in a
  child process with the default store, whose peak RSS (``VmHWM``) must stay within
  2.5x the result.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import TextContent

from bench._report import Row, Target
from toolbatch import ArtifactStore, Registry, SchedulerConfig, ToolCall, ToolScheduler
from toolbatch.producers import ProducerContext
from toolbatch.producers.mcp import McpServers, load_mcp_config

TEST_SERVER = Path(__file__).resolve().parents[1] / "tests" / "mcp_server" / "server.py"
BIG_CHARS = 50_000_000
QUICK_BIG_CHARS = 20_000_000
SDK_CAP_S = 180.0
"""The SDK path is stopped here (about 48 s at 50 MB on an idle 2-core machine, several
minutes under load); a stopped run makes the baseline, and the ratio, a lower bound."""
TARGET_SPEEDUP = 10.0
TARGET_ECHO_RATIO = 1.2
"""The producer alone (diagnostic)."""
TARGET_BATCH_ECHO_RATIO = 1.05
"""Issue 33 (1.1 in issue 18): one MCP echo through run_batch vs a bare
ClientSession.call_tool."""
BIG_RSS_CHARS = 200_000_000
QUICK_BIG_RSS_CHARS = 50_000_000
TARGET_RSS_FACTOR = 2.5
"""Issue 18: the peak RSS of one 200 MB MCP text result, as a multiple of the result."""
_RSS_CHILD = """
import sys, tempfile
import anyio
import toolbatch
from toolbatch import Registry, SchedulerConfig, ToolCall, ToolScheduler

async def main(server, n_chars):
    entry = {"command": sys.executable, "args": [server]}
    with tempfile.TemporaryDirectory() as tmp:
        config = SchedulerConfig(
            artifacts_dir=tmp, mcp_servers={"mcpServers": {"bench": entry}}, call_timeout=600
        )
        async with ToolScheduler(Registry(), config) as scheduler:
            # One text part (``big_text`` would also send it as structured content: twice).
            call = ToolCall(id="big", name="mcp__bench__texts", args={"sizes": [n_chars]})
            turn = await scheduler.run_batch([call])
            [response] = turn.responses
            assert response.status == "success", response
            print(sum(path.stat().st_size for path in scheduler.store.written))

toolbatch.configure_logging("error")
anyio.run(main, sys.argv[1], int(sys.argv[2]))
from bench._serve_child import peak_rss_kib
print(peak_rss_kib())  # VmHWM: ru_maxrss would carry the forked parent's size
"""
START_TIMEOUT_S = 120.0


def _servers() -> McpServers:
    entry = {"command": sys.executable, "args": [str(TEST_SERVER)]}
    config = load_mcp_config({"mcpServers": {"bench": entry}})
    return McpServers(config, start_timeout_s=START_TIMEOUT_S, default_timeout_s=600)


def _sdk_params() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(TEST_SERVER)])


async def _producer_big(n_chars: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        store = ArtifactStore(tmp)
        async with _servers() as servers:
            producer = servers.producer("mcp__bench__big_text")
            call = ToolCall(id="big", name="mcp__bench__big_text", args={"n_chars": n_chars})
            started = time.perf_counter()
            result = await producer.run(call, ProducerContext(store=store))
            elapsed = time.perf_counter() - started
            [path] = result.persisted_output_files or ()
            assert path.stat().st_size == n_chars, "the artifact must hold the whole result"
    return elapsed


async def _sdk_big(n_chars: int, errlog: TextIO) -> tuple[float, bool]:
    """The SDK's time for the result, and whether it finished within ``SDK_CAP_S``."""
    async with (
        stdio_client(_sdk_params(), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        started = time.perf_counter()
        with anyio.move_on_after(SDK_CAP_S) as scope:
            result = await session.call_tool("big_text", {"n_chars": n_chars})
        elapsed = time.perf_counter() - started
    if scope.cancelled_caught:
        return elapsed, False
    texts = [part for part in result.content if isinstance(part, TextContent)]
    if result.is_error or len(texts) != 1 or len(texts[0].text) != n_chars:
        # Under heavy load the SDK's session has returned an error result here: the
        # baseline did not finish, so its time is a lower bound, as when it is stopped.
        return elapsed, False
    return elapsed, True


async def _echo(calls: int, errlog: TextIO) -> tuple[list[float], list[float]]:
    ours: list[float] = []
    bare: list[float] = []
    async with (
        _servers() as servers,
        stdio_client(_sdk_params(), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        producer = servers.producer("mcp__bench__echo")
        for index in range(20):  # warm both paths up
            await session.call_tool("echo", {"text": f"warm {index}"})
            call = ToolCall(id=f"w{index}", name="mcp__bench__echo", args={"text": "w"})
            await producer.run(call, ProducerContext())
        for index in range(calls):
            text = f"echo {index}"
            call = ToolCall(id=f"c{index}", name="mcp__bench__echo", args={"text": text})
            # One of each per iteration, alternating which goes first, so load drift and
            # ordering effects fall on both paths alike.
            for run_ours in (index % 2 == 0, index % 2 == 1):
                context = ProducerContext()  # the runtime's input, like the bare call's args
                started = time.perf_counter()
                if run_ours:
                    result = await producer.run(call, context)
                    ours.append(time.perf_counter() - started)
                    assert result.error is None
                else:
                    reply = await session.call_tool("echo", {"text": text})
                    bare.append(time.perf_counter() - started)
                    assert not reply.is_error
    return ours, bare


async def _batch_echo(
    calls: int, errlog: TextIO
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Wall latencies of ours and of the bare call, then the client's CPU time of each
    (``time.thread_time``: the servers' work and the waits are not in it)."""
    entry = {"command": sys.executable, "args": [str(TEST_SERVER)]}
    ours: list[float] = []
    bare: list[float] = []
    ours_cpu: list[float] = []
    bare_cpu: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = SchedulerConfig(
            artifacts_dir=tmp,
            mcp_servers={"mcpServers": {"bench": entry}},
            mcp_startup_timeout=START_TIMEOUT_S,
        )
        async with (
            ToolScheduler(Registry(), config) as scheduler,
            stdio_client(_sdk_params(), errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for index in range(20):  # warm both paths up
                await session.call_tool("echo", {"text": f"warm {index}"})
                warm = ToolCall(id=f"w{index}", name="mcp__bench__echo", args={"text": "w"})
                await scheduler.run_batch([warm])
            for index in range(calls):
                text = f"echo {index}"
                call = ToolCall(id=f"c{index}", name="mcp__bench__echo", args={"text": text})
                for run_ours in (index % 2 == 0, index % 2 == 1):
                    cpu = time.thread_time()
                    started = time.perf_counter()
                    if run_ours:
                        turn = await scheduler.run_batch([call])
                        ours.append(time.perf_counter() - started)
                        ours_cpu.append(time.thread_time() - cpu)
                        assert turn.responses[0].status == "success"
                    else:
                        reply = await session.call_tool("echo", {"text": text})
                        bare.append(time.perf_counter() - started)
                        bare_cpu.append(time.thread_time() - cpu)
                        assert not reply.is_error
    return ours, bare, ours_cpu, bare_cpu


def _big_result_rss(n_chars: int) -> tuple[float, int]:
    """Peak RSS (MB) of a child running one ``n_chars`` result through run_batch, and the
    bytes it persisted."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(TEST_SERVER), str(n_chars)],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) < 2:
        raise RuntimeError(f"the RSS child failed: {done.stderr[-800:]}")
    return int(lines[-1]) * 1024 / 1e6, int(lines[-2])


def run(quick: bool) -> list[Row]:
    n_chars = QUICK_BIG_CHARS if quick else BIG_CHARS
    size = f"{n_chars // 1_000_000} MB" + (" (quick size)" if quick else "")
    ours_big = anyio.run(_producer_big, n_chars)
    # The SDK's stdio_client hands errlog to the subprocess: it must be a real file.
    with open(os.devnull, "w") as errlog:
        sdk_big, sdk_finished = anyio.run(_sdk_big, n_chars, errlog)
        ours, bare = anyio.run(_echo, 300 if quick else 1_000, errlog)
    speedup = sdk_big / ours_big
    ours_ms = statistics.median(ours) * 1000
    bare_ms = statistics.median(bare) * 1000
    echo_ratio = ours_ms / bare_ms
    with open(os.devnull, "w") as errlog:
        batch_ours, batch_bare, ours_cpu, bare_cpu = anyio.run(
            _batch_echo, 300 if quick else 1_000, errlog
        )
    batch_ms = statistics.median(batch_ours) * 1000
    batch_bare_ms = statistics.median(batch_bare) * 1000
    cpu_us = statistics.median(ours_cpu) * 1e6
    bare_cpu_us = statistics.median(bare_cpu) * 1e6
    rss_chars = QUICK_BIG_RSS_CHARS if quick else BIG_RSS_CHARS
    peak_mb, saved = _big_result_rss(rss_chars)
    result_mb = rss_chars / 1e6
    return [
        Row(
            area="mcp",
            name=f"one echo through run_batch (median of {len(batch_ours)})",
            value=batch_ms,
            unit="ms",
            baseline="bare ClientSession.call_tool on the same server",
            baseline_value=batch_bare_ms,
            ratio=batch_ms / batch_bare_ms,
            target=f"<= {TARGET_BATCH_ECHO_RATIO:g} (ratio = ours / bare latency)",
            goal=Target("ratio", "<=", TARGET_BATCH_ECHO_RATIO),
        ),
        Row(
            area="mcp",
            name=f"one echo through run_batch: client CPU (median of {len(ours_cpu)})",
            value=cpu_us,
            unit="µs",
            baseline="bare ClientSession.call_tool, same run",
            baseline_value=bare_cpu_us,
            ratio=cpu_us / bare_cpu_us,
            target="diagnostic (thread CPU time: the scheduler's per-batch cost without waits)",
        ),
        Row(
            area="mcp",
            name=f"one {result_mb:g} MB text result through run_batch: peak RSS",
            value=peak_mb,
            unit="MB",
            baseline=f"the result ({saved / 1e6:g} MB persisted)",
            baseline_value=result_mb,
            ratio=peak_mb / result_mb,
            target=f"<= {TARGET_RSS_FACTOR:g}x the result (ratio = peak RSS / result)",
            goal=Target("ratio", "<=", TARGET_RSS_FACTOR),
        ),
        Row(
            area="mcp",
            name=f"{size} tool result through the producer (linear stdio, persisted)",
            value=ours_big,
            unit="s",
            baseline="SDK stdio_client + ClientSession.call_tool, same server"
            + ("" if sdk_finished else f" (stopped at {SDK_CAP_S:g} s: a lower bound)"),
            baseline_value=sdk_big,
            ratio=speedup,
            target=f">= {TARGET_SPEEDUP:g}x faster (ratio = SDK time / ours)",
            goal=Target("ratio", ">=", TARGET_SPEEDUP),
        ),
        Row(
            area="mcp",
            name=f"echo round trip through the producer (median of {len(ours)})",
            value=ours_ms,
            unit="ms",
            baseline="bare ClientSession.call_tool over SDK stdio_client",
            baseline_value=bare_ms,
            ratio=echo_ratio,
            target=f"diagnostic (was <= {TARGET_ECHO_RATIO:g}; the producer alone)",
        ),
    ]
