"""The chaos campaign: seeded batches of real tool calls under faults, checked after each.

``await run_campaign(CampaignOptions(seed=7, batches=50))`` runs the campaign in the current
event loop and returns a ``CampaignReport``; ``bench/chaos.py`` prints it. Everything is
real: the scheduler, ``bash`` commands, the MCP test server over stdio, ``@tool`` functions,
Python hooks and a command-hook script, files on disk (see ``bench._chaos_faults`` for how
the faults are made). A canary secret and a process marker are planted in ``os.environ``
for the campaign and removed afterwards; structlog is configured to capture every event
and restored afterwards.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
import structlog

from bench import _chaos_checks as checks
from bench._chaos_boundaries import run_boundaries
from bench._chaos_faults import (
    PY_HOOK_TIMEOUT_S,
    VICTIM_BYTES,
    ChaosStore,
    HookProbe,
    Planted,
    SmallDisk,
    build_hooks,
    build_registry,
    eacces_is_real,
    plant_symlinks,
)
from bench._chaos_plan import (
    MCP_SERVER,
    MCP_TIMEOUT_S,
    MCP_TRIGGER_CHARS,
    BatchPlan,
    CallSpec,
    plan_batch,
    plan_digest,
)
from toolbatch import (
    FunctionResponsePart,
    JsonlRecorder,
    RecorderError,
    SchedulerConfig,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolScheduler,
    Turn,
    load_session,
)
from toolbatch.producers import ProducerContext
from toolbatch.producers.mcp import (
    DEFAULT_INHERITED_ENV_VARS as MCP_ENV_VARS,
    McpServers,
    load_mcp_config,
)
from toolbatch.sandbox._environment import DEFAULT_INHERITED_ENV_VARS as HOOK_ENV_VARS
from toolbatch.sandbox._reaper import ensure_reaper
from toolbatch.transports import make_output_adapter

__all__ = ["TEST_SERVER", "VIOLATIONS", "CampaignOptions", "CampaignReport", "run_campaign"]

TEST_SERVER: Final = Path(__file__).resolve().parents[1] / "tests" / "mcp_server" / "server.py"
WATCHDOG_S: Final = 60.0
"""A batch still running after this long is counted as hung and cancelled. toolbatch's own
bound for a campaign batch is below it: the call ceiling (at most 3 s) and its 10 s
backstop, one 30 s persist deadline for the turn on a hanging disk, and the hooks' timeouts
(seed 24, batch 121 took 74 s when each finalize pass had its own 30 s)."""
SLOW_FSYNC_S: Final = 4.0
"""Each fsync of a slow disk (``store.slow_disk``) waits this long."""
SETTLE_S: Final = 3.0
"""How long processes get to disappear after a batch before they count as left behind, and
writes a deadline abandoned to be cleaned up."""
MCP_START_TIMEOUT_S: Final = 60.0
NOBODY_UID: Final = 65534

VIOLATIONS: Final = {
    "order": "batches with a missing, extra or out-of-order response",
    "budget": "batches over budget",
    "media": "parts sent as media that are not (bytes, MIME type or URI)",
    "written_twice": "artifacts written twice for the same content",
    "processes": "processes left behind (/proc)",
    "fds": "file descriptors leaked (/proc/self/fd)",
    "field_serialized": "persisted_output_files in serialized output, hook input or log",
    "recorded": "recorded parts differing from sent parts",
    "outside": "writes outside the artifact directories",
    "modes": "artifact files not 0600",
    "injected": "hook-injected persisted_output_files surviving",
    "env": "environment leaks to command hooks or MCP servers",
    "status": "responses not answered as the call requires",
    "hook_budget": "hook inputs over budget",
    "temp_files": "artifact temp files left behind",
    "hooks_skipped": "command hooks never shown the batch (crashed inside toolbatch)",
    "raised": "run_batch raised",
    "hung": "batches hung past the watchdog",
    "recorder": "failed transcript appends that changed the file or lost a turn",
    "hijacked": "writes into a hijacked fallback directory",
    "boundaries": "boundary faults not survived (JSON, floods, readers, kill -9)",
}
"""Every violation counter and what it counts; the campaign fails if any is above zero."""


@dataclass(frozen=True, slots=True)
class CampaignOptions:
    """How to run a campaign.

    Attributes:
        seed: decides every batch and fault (see ``bench._chaos_plan``).
        batches: how many batches to run (batch numbers 0 to ``batches - 1``).
        indices: run these batch numbers instead (``covering_batches`` picks few that
            inject every fault kind); ``batches`` is then ignored.
        skip_boundaries: boundary faults (``BOUNDARY_KINDS``) not to run, each with where
            else it runs (reported under the kinds not injected).
        work_dir: where to make the campaign's own work directory (default: the system
            temp directory); that directory is removed afterwards unless ``keep``.
        keep: keep the work directory (artifacts, transcripts, hook reports).
        verbose: one line per batch and toolbatch's warnings, on stderr.
    """

    seed: int = 1
    batches: int = 500
    indices: tuple[int, ...] | None = None
    skip_boundaries: Mapping[str, str] = field(default_factory=dict)
    work_dir: Path | None = None
    keep: bool = False
    verbose: bool = False


@dataclass(slots=True)
class CampaignReport:
    """What a campaign found.

    Attributes:
        violations: each counter of ``VIOLATIONS``.
        details: the first few problems behind each non-zero counter.
        totals: what was run (batches, calls, artifacts, aborts, ...).
        faults: what was injected, by kind (from the plans, so a seed always gives these).
        skipped: fault kinds this machine could not inject, and why.
        warnings: toolbatch's warning events, by name.
        plan_digest: identifies the sequence of plans (equal for equal seeds).
        seconds: the wall time.
        work_dir: the campaign's work directory (gone afterwards unless kept).
    """

    options: CampaignOptions
    violations: Counter[str] = field(default_factory=Counter)
    details: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    totals: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    skipped: dict[str, str] = field(default_factory=dict)
    warnings: Counter[str] = field(default_factory=Counter)
    plan_digest: str = ""
    seconds: float = 0.0
    work_dir: Path | None = None

    @property
    def failed(self) -> bool:
        """Whether any violation counter is above zero."""
        return any(self.violations[key] for key in VIOLATIONS)

    def count(self, key: str, batch: int | None, problems: list[str], *, per_batch: bool) -> None:
        """Count ``problems`` under ``key``: once for the batch, or one each."""
        if not problems:
            return
        self.violations[key] += 1 if per_batch else len(problems)
        where = "end" if batch is None else f"batch {batch}"
        for problem in problems[:3]:
            if len(self.details[key]) < 6:
                self.details[key].append(f"{where}: {problem}")


class _LogProbe:
    """A structlog processor that sees every event and keeps none of them."""

    def __init__(self, report: CampaignReport, needles: Mapping[str, str], verbose: bool) -> None:
        self.report = report
        self.needles = needles
        self.verbose = verbose
        self.batch: int | None = None
        self.hook_crashes: list[str] = []

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        text = checks.safe_json(event)
        self.report.totals["log events"] += 1
        for needle, key in self.needles.items():
            if needle in text:
                self.report.count(
                    key, self.batch, [f"log event {event.get('event')!r}"], per_batch=False
                )
        level = event.get("level", method)
        if level in ("warning", "error", "critical"):
            self.report.warnings[str(event.get("event"))] += 1
            if self.verbose:
                print(f"  [{level}] {text[:300]}", file=sys.stderr)
        if event.get("event") == "hooks.crashed" and str(event.get("hook", "")).startswith(
            "command:"
        ):
            self.hook_crashes.append(str(event.get("error", ""))[:200])
        raise structlog.DropEvent


@contextlib.contextmanager
def _captured_logs(probe: _LogProbe) -> Iterator[None]:
    saved = structlog.get_config()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            probe,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    try:
        yield
    finally:
        structlog.configure(**saved)


@contextlib.contextmanager
def _planted_environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _RawObserver:
    """Keeps each call's response before finalization (what the producer really said)."""

    def __init__(self) -> None:
        self.finished: list[tuple[ToolCall, ToolCallResponse]] = []

    def call_started(self, call: ToolCall) -> None:
        del call

    def call_progress(self, call: ToolCall, message: str) -> None:
        del call, message

    def call_finished(self, call: ToolCall, response: ToolCallResponse) -> None:
        self.finished.append((call, response))


def _output_text(response: ToolCallResponse) -> str | None:
    first = response.parts[0] if response.parts else None
    if isinstance(first, FunctionResponsePart):
        output = first.function_response.response.get("output")
        return output if isinstance(output, str) else None
    return None


def _headless_texts(order: list[CallSpec], turn: Turn, budget: int | None) -> list[str]:
    """The turn through the headless adapters: stream-json, its sidecar, and json."""
    texts: list[str] = []
    for output_format in ("stream-json", "json"):
        main, sidecar = io.StringIO(), io.StringIO()
        adapter = make_output_adapter(output_format, main, dual_output=sidecar)
        adapter.init("chaos", ["run_shell_command"], model="chaos")
        for spec, response in zip(order, turn.responses, strict=False):
            args = spec.raw.get("args") if isinstance(spec.raw, dict) else None
            call = ToolCall(
                id=response.call_id,
                name=response.name,
                args=args if isinstance(args, dict) else {},
            )
            adapter.tool_use(call)
            adapter.tool_result(call, response)
        adapter.result(num_turns=1, budget_chars=budget)
        adapter.close()
        texts += [main.getvalue(), sidecar.getvalue()]
    return texts


def _hijack(kind: str, base: Path) -> Path | None:
    """The fallback directory as another user would plant it (``None``: not possible here)."""
    planted = base.with_name(f"{base.name}-hijacked-fallback")
    if kind == "symlink":
        target = base.with_name(f"{base.name}-attackers-dir")
        target.mkdir(mode=0o700)
        planted.symlink_to(target)
    elif kind == "world-writable":
        planted.mkdir()
        planted.chmod(0o777)
    else:
        if os.geteuid() != 0:
            return None
        planted.mkdir(mode=0o700)
        os.chown(planted, NOBODY_UID, NOBODY_UID)
    return planted


def _files(directory: Path) -> list[Path]:
    return sorted(directory.iterdir()) if directory.is_dir() else []


class _Campaign:
    def __init__(self, options: CampaignOptions, work: Path, report: CampaignReport) -> None:
        self.options = options
        self.work = work
        self.report = report
        self.marker_value = uuid.uuid4().hex
        self.marker = f"CHAOS_RUN={self.marker_value}"
        self.canary = f"canary-{uuid.uuid4().hex}"
        self.small_disk = SmallDisk(work / "smallfs")
        self.eacces = eacces_is_real()
        self.probe = _LogProbe(
            report,
            {
                **dict.fromkeys(checks.FIELD_NEEDLES, "field_serialized"),
                self.canary: "env",
            },
            options.verbose,
        )
        self.servers: McpServers | None = None
        self.registry: Any = None
        self.mcp_env = {"CHAOS_RUN": self.marker_value, "CHAOS_MCP_MARK": "configured"}
        self.hook_env = {"CHAOS_RUN": self.marker_value}
        self.reported_pids: set[int] = set()

    # -- the whole campaign ------------------------------------------------------------

    async def run(self) -> None:
        options, report = self.options, self.report
        for sub in ("batches", "transcripts", "hookreports", "victims", "injected"):
            (self.work / sub).mkdir(parents=True, exist_ok=True)
        if not self.small_disk.mount():
            report.skipped["store.disk_full"] = self.small_disk.problem or "no tmpfs"
        if not self.eacces:
            report.skipped["store.eacces"] = "the kernel does not refuse writes in /sys/kernel"
        environment = {
            "CHAOS_RUN": self.marker_value,
            "CHAOS_CANARY_SECRET": self.canary,
            "TOOLBATCH_CHAOS_API_KEY": self.canary,
        }
        indices = range(options.batches) if options.indices is None else options.indices
        warmup = max(1, min(10, len(indices) // 10))
        try:
            with _planted_environment(environment), _captured_logs(self.probe):
                # The reaper's pipe lives as long as this process: open it before the
                # baseline, or a standalone run counts it as leaked.
                ensure_reaper()
                fds_at_start = checks.open_fds()
                config = load_mcp_config(
                    {
                        "mcpServers": {
                            MCP_SERVER: {
                                "command": sys.executable,
                                "args": [str(TEST_SERVER)],
                                "env": self.mcp_env,
                                "timeout": MCP_TIMEOUT_S * 1000,
                            }
                        }
                    }
                )
                servers = McpServers(
                    config,
                    start_timeout_s=MCP_START_TIMEOUT_S,
                    large_output_trigger_chars=MCP_TRIGGER_CHARS,
                )
                async with servers:
                    if servers.failures:
                        raise RuntimeError(
                            f"the MCP test server did not start: {dict(servers.failures)}"
                        )
                    self.servers = servers
                    self.registry = build_registry(servers.producers())
                    baseline: dict[int, str] | None = None
                    plans = []
                    for done, index in enumerate(indices, start=1):
                        plan = plan_batch(options.seed, index)
                        plans.append(plan)
                        await self.batch(plan)
                        if done == warmup:
                            await self.mcp_alive()
                            baseline = checks.open_fds()
                    report.plan_digest = plan_digest(plans)
                    await self.boundaries()
                    await self.mcp_alive()
                    if baseline is not None:
                        problems = checks.fd_problems(baseline, checks.open_fds())
                        report.count("fds", None, problems, per_batch=False)
                self.servers = None
                self.probe.batch = None
                await self.check_processes(None)
                after = checks.fd_problems(fds_at_start, checks.open_fds())
                if after and not report.violations["fds"]:
                    report.count("fds", None, after, per_batch=False)
        finally:
            self.small_disk.unmount()

    async def boundaries(self) -> None:
        """The faults from outside a batch, once per campaign (``bench._chaos_boundaries``)."""
        skip = self.options.skip_boundaries
        self.report.skipped.update(skip)
        faults, problems = await run_boundaries(
            self.work / "boundaries", self.marker, skip=frozenset(skip)
        )
        self.report.faults.update(faults)
        self.report.count("boundaries", None, problems, per_batch=False)
        self.report.totals["boundary faults survived"] += sum(faults.values()) - len(
            {problem.split(":", 1)[0] for problem in problems}
        )

    async def mcp_alive(self) -> None:
        """Make sure the MCP server runs (restarting it if a crash left it down)."""
        assert self.servers is not None
        producer = self.servers.producer(f"mcp__{MCP_SERVER}__echo")
        call = ToolCall(id="chaos-alive", name=f"mcp__{MCP_SERVER}__echo", args={"text": "up"})
        await producer.run(call, ProducerContext(timeout_s=MCP_START_TIMEOUT_S))

    async def settled_processes(self, *, exclude_pgids: tuple[int, ...]) -> dict[int, str]:
        """Marked processes still alive after up to ``SETTLE_S``."""
        deadline = anyio.current_time() + SETTLE_S
        while True:
            left = checks.marked_processes(self.marker, exclude_pgids=exclude_pgids)
            if not left or anyio.current_time() >= deadline:
                return left
            await anyio.sleep(0.05)

    # -- one batch ------------------------------------------------------------------------

    async def batch(self, plan: BatchPlan) -> None:
        report = self.report
        index = plan.index
        self.probe.batch = index
        self.probe.hook_crashes.clear()
        report.faults.update(plan.faults)
        name = f"b{index:04d}"
        batch_dir = self.work / "batches" / name
        primary, fallback = batch_dir / "artifacts", batch_dir / "fallback"
        disk_full = plan.disk_full and self.small_disk.mounted
        if disk_full:
            primary = self.small_disk.mount_point / name / "artifacts"
            if plan.fallback_on_small_fs:
                fallback = self.small_disk.mount_point / name / "fallback"
        elif plan.disk_full:
            report.faults["store.disk_full"] -= 1
        if plan.eacces_percent and not self.eacces:
            report.faults["store.eacces"] -= 1
        hijacked: Path | None = None
        if plan.hijacked_fallback is not None:
            # Both planted under victims/, which the stray-file check leaves alone.
            hijacked = _hijack(plan.hijacked_fallback, self.work / "victims" / name)
            if hijacked is None:
                report.faults["store.hijacked_fallback"] -= 1
            else:
                fallback = hijacked
                blocker = self.work / "victims" / f"{name}-blocker"
                blocker.write_text("the primary directory cannot be made here\n")
                primary = blocker / "artifacts"
        store = ChaosStore(
            primary,
            fallback_dir=fallback,
            deny_percent=plan.eacces_percent if self.eacces else 0,
            deny_seed=plan.salt,
        )
        if plan.disk_delay == "slow":
            store.fsync_delay_s = SLOW_FSYNC_S
        elif plan.disk_delay == "hanging":
            store.disk_back.clear()
        planted: list[Planted] = []
        if plan.symlinks and hijacked is not None:
            report.faults["store.symlink"] -= 1  # the directories are not the store's to plant in
        elif plan.symlinks:
            planted = plant_symlinks(store, plan, self.work / "victims")
            report.totals["symlinks planted"] += len(planted)
        if disk_full:
            self.small_disk.fill(plan.disk_free_bytes)
        report_dir = self.work / "hookreports" / name
        report_dir.mkdir()
        inject_path = self.work / "injected" / f"{name}.txt"
        inject_path.write_text("a file a hook claims holds complete output\n")
        probe = HookProbe()
        hooks = (
            build_hooks(
                plan,
                probe,
                inject_path=inject_path,
                report_dir=report_dir,
                hook_env=self.hook_env,
            )
            if plan.hooks
            else []
        )
        transcript = self.work / "transcripts" / f"{name}.jsonl"
        recorder_fault = plan.recorder_free_bytes is not None and self.small_disk.mounted
        if plan.recorder_free_bytes is not None and not recorder_fault:
            report.faults["recorder.full_disk"] -= 1
        if recorder_fault:
            transcript = self.small_disk.mount_point / name / "transcript.jsonl"
        recorder = JsonlRecorder(transcript, session_id=f"chaos-{index}")
        if recorder_fault:
            # One complete record first, then the disk fills: the turn's append must fail
            # without touching it (or fit), and every complete record must load.
            await recorder.record_message("user", [TextPart(text=f"{plan.salt} before")])
            self.small_disk.fill(plan.recorder_free_bytes or 0)
        transcript_before = transcript.read_bytes() if recorder_fault else b""
        swapped: tuple[Path, Path] | None = None
        refused = False
        if plan.recording_symlinked:
            # The transcript is open (one record), then swapped for a symlink to a victim,
            # as a command in the workspace could: the turn's record must fail, touching
            # neither the victim nor the kept transcript.
            await recorder.record_message("user", [TextPart(text=f"{plan.salt} before")])
            victim = self.work / "victims" / f"{name}-transcript-victim"
            victim.parent.mkdir(parents=True, exist_ok=True)
            victim.write_bytes(VICTIM_BYTES)
            kept = self.work / "transcripts" / f"{name}.kept.jsonl"
            transcript.rename(kept)
            transcript.symlink_to(victim)
            swapped = (victim, kept)
        config = SchedulerConfig(
            batch_budget=plan.budget,
            concurrency=plan.concurrency,
            call_timeout=plan.call_timeout,
            store=store,
            hooks=hooks,
            hook_timeout=PY_HOOK_TIMEOUT_S,
            recorder=recorder,
            session_id=f"chaos-{index}",
        )
        observer = _RawObserver()
        abort = anyio.Event()
        turn: Turn | None = None
        started = time.perf_counter()

        async def abort_later(delay: float) -> None:
            await anyio.sleep(delay)
            abort.set()

        async with (
            ToolScheduler(self.registry, config) as scheduler,
            anyio.create_task_group() as tg,
        ):
            if plan.abort_after_s is not None:
                tg.start_soon(abort_later, plan.abort_after_s)
            limit = plan.hard_cancel_after_s
            with anyio.move_on_after(WATCHDOG_S if limit is None else limit) as scope:
                try:
                    turn = await scheduler.run_batch(plan.raw_calls, abort=abort, observer=observer)
                except RecorderError as exc:
                    if swapped is not None:
                        refused = True
                        turn = await self.check_swapped_transcript(
                            plan, exc, recorder, transcript, *swapped
                        )
                    else:
                        turn = await self.check_failed_append(
                            plan, exc, recorder, transcript, transcript_before
                        )
                except Exception as exc:  # bad input must never escape run_batch
                    report.count("raised", index, [f"{type(exc).__name__}: {exc}"], per_batch=True)
            tg.cancel_scope.cancel()
        elapsed = time.perf_counter() - started
        report.totals["batch seconds (max)"] = max(
            report.totals["batch seconds (max)"], round(elapsed)
        )
        if scope.cancelled_caught and limit is None:
            report.count("hung", index, [f"still running after {WATCHDOG_S:g} s"], per_batch=True)
        if scope.cancelled_caught and limit is not None:
            report.totals["batches cancelled by the caller"] += 1

        if swapped is not None and turn is not None and not refused:
            swap_problem = ["a swapped transcript was recorded to"]
            report.count("recorder", index, swap_problem, per_batch=False)
        recorder.close()  # a recorder holds its transcript open until closed
        store.disk_back.set()
        await self.settle_store(store, [primary, fallback])
        await self.check_processes(index)
        if hijacked is not None:
            self.check_hijacked(plan, store, hijacked)
            fallback = batch_dir / "fallback"  # the store's checks look at its own dirs
        self.check_store(plan, store, planted, primary, fallback)
        hook_texts = self.check_command_hooks(plan, report_dir)
        self.check_mcp_env(index, observer)
        if turn is not None:
            self.check_turn(plan, turn, probe, hook_texts, transcript, inject_path)
        if self.probe.hook_crashes:
            report.count("hooks_skipped", index, list(self.probe.hook_crashes), per_batch=False)

        report.totals["batches"] += 1
        report.totals["calls"] += len(plan.calls)
        report.totals["artifacts written"] += len(store.written)
        report.totals["artifacts in the fallback directory"] += sum(
            1 for path in store.written if path.parent == store.fallback_dir
        )
        report.totals["primary writes refused (EACCES)"] += store.denied
        if self.options.verbose:
            kinds = ", ".join(sorted(plan.faults))
            print(
                f"batch {index}: {len(plan.calls)} calls, budget {plan.budget}, "
                f"{elapsed:.2f} s, {len(store.written)} artifacts; {kinds}",
                file=sys.stderr,
            )
        if not self.options.keep:
            shutil.rmtree(batch_dir, ignore_errors=True)
            shutil.rmtree(report_dir, ignore_errors=True)
            transcript.unlink(missing_ok=True)
            inject_path.unlink(missing_ok=True)
            for entry in (self.work / "victims").iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)  # a hijacked directory
                else:
                    entry.unlink()
        if self.small_disk.mounted:
            self.small_disk.clear()

    async def check_failed_append(
        self,
        plan: BatchPlan,
        exc: RecorderError,
        recorder: JsonlRecorder,
        transcript: Path,
        before: bytes,
    ) -> Turn | None:
        """A failed append: the transcript is as it was, and once there is room again the
        same recorder records the turn, after every earlier complete record."""
        report, index = self.report, plan.index
        turn = exc.turn if isinstance(exc.turn, Turn) else None
        problems: list[str] = []
        if plan.recorder_free_bytes is None or not self.small_disk.mounted:
            report.count("raised", index, [f"RecorderError: {exc}"], per_batch=True)
            return turn
        report.totals["transcript appends failed (full disk)"] += 1
        if turn is None:
            problems.append("RecorderError without the turn it did not record")
        if await anyio.Path(transcript).read_bytes() != before:
            problems.append("the failed append changed the transcript")
        self.small_disk.filler.unlink(missing_ok=True)
        if turn is not None:
            try:
                await recorder.record_turn(turn)
            except RecorderError as again:
                problems.append(f"the next append failed too: {again}")
        entries = load_session(transcript)
        if [entry.type for entry in entries] != ["message", "tool_turn"]:
            problems.append(f"the transcript loads as {[entry.type for entry in entries]}")
        report.count("recorder", index, problems, per_batch=False)
        return turn

    async def check_swapped_transcript(
        self,
        plan: BatchPlan,
        exc: RecorderError,
        recorder: JsonlRecorder,
        transcript: Path,
        victim: Path,
        kept: Path,
    ) -> Turn | None:
        """A transcript swapped for a symlink: the record failed and nothing was written
        anywhere; once the real transcript is back, the same recorder records the turn."""
        problems: list[str] = []
        turn = exc.turn if isinstance(exc.turn, Turn) else None
        if await anyio.Path(victim).read_bytes() != VICTIM_BYTES:
            problems.append("the turn was appended through the transcript's symlink")
        if [entry.type for entry in load_session(kept)] != ["message"]:
            problems.append("the kept transcript changed")
        if "replaced" not in str(exc):
            problems.append(f"the error does not name the swap: {exc}")
        await anyio.Path(transcript).unlink()
        await anyio.Path(kept).rename(transcript)
        if turn is None:
            problems.append("RecorderError without the turn it did not record")
        else:
            try:
                await recorder.record_turn(turn)
            except RecorderError as again:
                problems.append(f"the restored transcript refused the turn: {again}")
        self.report.count("recorder", plan.index, problems, per_batch=False)
        self.report.totals["transcripts swapped for a symlink, nothing followed"] += 1
        return turn

    async def settle_store(self, store: ChaosStore, directories: list[Path]) -> None:
        """Wait (bounded) for writes a deadline abandoned to be cleaned up by their threads:
        a temp part still there afterwards is a leak the store's checks report."""
        with anyio.move_on_after(SETTLE_S):
            while checks.temp_files(directories):  # noqa: ASYNC110 (pool threads, no event)
                await anyio.sleep(0.05)

    def check_hijacked(self, plan: BatchPlan, store: ChaosStore, hijacked: Path) -> None:
        """Nothing may be written into (or through) a fallback someone else controls."""
        problems = checks.hijack_problems(store.written, hijacked)
        self.report.count("hijacked", plan.index, problems, per_batch=False)
        self.report.totals["batches with a hijacked fallback, nothing written"] += not problems

    async def check_processes(self, index: int | None) -> None:
        """Count marked processes still alive, each once, then end them."""
        exclude: tuple[int, ...] = ()
        if self.servers is not None:
            server_pid = self.servers.connection(MCP_SERVER).pid
            exclude = (server_pid,) if server_pid is not None else ()
        left = await self.settled_processes(exclude_pgids=exclude)
        new = {pid: cmd for pid, cmd in left.items() if pid not in self.reported_pids}
        self.report.count(
            "processes", index, [f"pid {pid}: {cmd}" for pid, cmd in new.items()], per_batch=False
        )
        self.reported_pids.update(new)
        for pid in new:
            # Found and counted: end it (the campaign started it) so it is not counted again.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def check_store(
        self,
        plan: BatchPlan,
        store: ChaosStore,
        planted: list[Planted],
        primary: Path,
        fallback: Path,
    ) -> None:
        report, index = self.report, plan.index
        directories = [primary, fallback]
        written = list(store.written)
        contents = {path: path.read_bytes() for path in set(written) if path.is_file()}
        report.count(
            "written_twice",
            index,
            checks.duplicate_artifact_problems(written, store.owners, contents, directories),
            per_batch=False,
        )
        files = [path for directory in directories for path in _files(directory)]
        report.count(
            "temp_files", index, [str(p) for p in checks.temp_files(directories)], per_batch=False
        )
        report.count("modes", index, checks.mode_problems(files, directories), per_batch=False)

        outside: list[str] = []
        links = {item.link for item in planted}
        outside += checks.outside_problems(files, directories, expected_links=links)
        outside += [
            f"artifact {path.name[:80]} is not in the store's directories"
            for path in written
            if path.parent not in (primary, fallback)
        ]
        outside += [
            f"written artifact {p.name[:80]} is a symlink" for p in written if p.is_symlink()
        ]
        for item in planted:
            if item.victim.read_bytes() != VICTIM_BYTES:
                outside.append(f"a planted symlink was followed: {item.victim.name} changed")
            if not item.link.is_symlink():
                report.totals["planted symlinks replaced by the artifact"] += 1
        skip = {self.work / sub for sub in ("transcripts", "hookreports", "victims", "injected")}
        skip.add(self.small_disk.filler)
        skip.add(self.small_disk.mount_point / f"b{index:04d}" / "transcript.jsonl")
        batches = self.work / "batches"
        if batches.is_dir():  # earlier batches' directories remain under --keep
            skip.update(entry for entry in batches.iterdir() if entry.name != primary.parent.name)
        strays = checks.stray_files(self.work, allowed=directories, skip=skip)
        outside += [f"stray file {str(path)[:200]!r}" for path in strays]
        for pattern in (f"/tmp/chaos-*{plan.salt}c*", f"/etc/chaos-*{plan.salt}c*"):
            outside += [f"escaped to {hit!r}" for hit in glob.glob(pattern)]
        report.count("outside", index, outside, per_batch=False)

    def check_command_hooks(self, plan: BatchPlan, report_dir: Path) -> list[str]:
        """Check each command hook's environment; return the inputs they were given."""
        texts: list[str] = []
        for path in sorted(report_dir.glob("*.env.json")):
            env = json.loads(path.read_bytes())
            problems = checks.env_problems(
                env,
                allowed=HOOK_ENV_VARS,
                configured={**self.hook_env, "CHAOS_HOOK_DIR": str(report_dir)},
                canary=self.canary,
                who="command hook",
            )
            self.report.count("env", plan.index, problems, per_batch=False)
            self.report.totals["command hook environments checked"] += 1
        for path in sorted(report_dir.glob("*.stdin.json")):
            texts.append(path.read_bytes().decode("utf-8", "backslashreplace"))
        return texts

    def check_mcp_env(self, index: int, observer: _RawObserver) -> None:
        for call, response in observer.finished:
            if call.name != f"mcp__{MCP_SERVER}__env" or response.status != "success":
                continue
            text = _output_text(response)
            if text is None:
                continue
            problems = checks.env_problems(
                json.loads(text),
                allowed=MCP_ENV_VARS,
                configured=self.mcp_env,
                canary=self.canary,
                who="MCP server",
            )
            self.report.count("env", index, problems, per_batch=False)
            self.report.totals["MCP server environments checked"] += 1

    def check_turn(
        self,
        plan: BatchPlan,
        turn: Turn,
        probe: HookProbe,
        hook_texts: list[str],
        transcript: Path,
        inject_path: Path,
    ) -> None:
        report, index = self.report, plan.index
        order = plan.expected_order
        report.totals["responses"] += len(turn.responses)
        report.totals["responses cancelled by an abort"] += sum(
            1 for r in turn.responses if r.status == "cancelled"
        )
        report.count(
            "order", index, checks.order_problems(order, turn.responses, turn.parts), per_batch=True
        )
        stopped = "py.stop" in plan.hooks
        status = checks.status_problems(
            order, turn.responses, stopped=stopped, stop_reason=turn.stop_reason
        )
        report.count("status", index, status, per_batch=False)
        report.count(
            "budget", index, checks.budget_problems(turn.parts, plan.budget), per_batch=True
        )
        if plan.budget is not None:  # no budget: nothing is checked, media included
            report.count("media", index, checks.media_problems(turn.parts), per_batch=True)
        if plan.budget is not None:
            over = [chars for chars in probe.input_chars if chars > plan.budget]
            over += [
                chars
                for text in hook_texts
                if (chars := checks.hook_input_chars(json.loads(text))) > plan.budget
            ]
            report.count(
                "hook_budget",
                index,
                [f"a hook was shown {c:,} characters" for c in over],
                per_batch=False,
            )

        serialized = [
            checks.model_json(turn),
            *(checks.model_json(response) for response in turn.responses),
            checks.dump_parts(turn.parts),
            *_headless_texts(order, turn, plan.budget),
        ]
        leaks = checks.field_leaks([*serialized, *probe.inputs, *hook_texts])
        report.count(
            "field_serialized",
            index,
            ["in serialized output or hook input"] * leaks,
            per_batch=False,
        )
        report.totals["hook inputs checked"] += len(probe.inputs) + len(hook_texts)

        recorded = load_session(transcript)
        report.count(
            "recorded", index, checks.recorded_problems(turn.parts, recorded), per_batch=True
        )
        if probe.injected_into:
            report.totals["hook injections attempted"] += len(probe.injected_into)
            texts = [*serialized, transcript.read_bytes().decode("ascii", "replace")]
            problems = checks.injection_problems(turn.responses, texts, str(inject_path))
            report.count("injected", index, problems, per_batch=False)


async def run_campaign(options: CampaignOptions) -> CampaignReport:
    """Run a campaign in the current event loop (see the module docstring)."""
    report = CampaignReport(options=options)
    started = time.perf_counter()
    if options.work_dir is not None:
        options.work_dir.mkdir(parents=True, exist_ok=True)
    # Always a new directory of our own: removing it afterwards removes nothing else.
    work = Path(tempfile.mkdtemp(prefix="toolbatch-chaos-", dir=options.work_dir))
    report.work_dir = work
    try:
        await _Campaign(options, work, report).run()
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report
