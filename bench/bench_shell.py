"""Shell producer: 1 GiB of output through the producer vs the same stream into ``cat``.

Issue 18's row: 1 GiB through the producer with the default on-disk store (a fresh
``ArtifactStore`` on this machine's disk with its default caps, so it keeps the first
64 MiB, fsynced, and counts the rest) against the same command into ``cat > /dev/null``,
alternately, best of ``ROUNDS`` (target: ratio at least 0.8). The rows below it are
diagnostics of the capture path with the caps raised so all 1 GiB is persisted.

The stream is ``cat <1 GiB text file>`` (56-byte lines; the file sits on tmpfs, so the
generator is one cheap process and both sides read the same bytes). Each side runs in the
same run, alternately, best of ``ROUNDS``:

* baseline: ``bash -c "<stream> | cat > /dev/null"``;
* ours: ``ShellProducer.run`` on ``<stream>`` with the store's caps raised to fit, so all
  1 GiB is persisted to one artifact (head/tail in memory, preview decoded).

The producer runs in a child Python process that resets its peak RSS (``/proc/self/clear_refs``)
before the call and reads ``VmHWM`` after it, so the RSS growth is the call's alone; a 1 MiB
output in another child is the comparison ("a 1 GiB output costs no more than 1 MiB").

The store sits on tmpfs (``/dev/shm``) for the main row: the 1 GiB artifact's fsync on this
VM's disk alone takes about 4 s (``dd conv=fsync``), which measures the disk, not the
producer. A second row puts the store on disk and compares with ``cat > file`` plus ``sync``
of that file, the same disk work done by coreutils.

Issue 28's sandbox row times short commands (``true``) through the producer with the default
``workspace-write`` sandbox (bubblewrap's namespaces, Landlock and seccomp: the session's
long-lived ``bwrap`` and its spawner, started once per policy, see
``toolbatch/sandbox/_spawner.py``) and with ``sandbox="off"``, alternately in the same
process, best of ``ROUNDS`` batches: the difference is what the sandbox costs per command
(target: at most 3 ms). Landlock alone (as without bubblewrap) is measured beside them.

Issue 33's short-command row: one ``true`` as a whole batch through ``run_batch`` with the
default configuration (``run_shell_command`` under the default sandbox, whatever it is)
against ``asyncio.create_subprocess_shell("true")`` with its output piped and read, one of
each in turn in the same event loop, median of each (target: at most 2x). A diagnostic row
does the same with ``sandbox="off"``: the host's own overhead (the scheduler, the producer,
the capture), which the 2x includes. Another runs bare ``bash -c true`` against the same
baseline: the tool's shell is bash, whose own start costs about 1.5x ``/bin/sh``'s (dash)
here, so that much of the 2x is spent before toolbatch does anything. A last one gives the
CPU this process spent per call, ours against the baseline's (whose share includes forking
``/bin/sh``; ours does not fork here, the sandbox's supervisor does): unlike the times, it
hardly moves with the machine's load, so it tells the host's own cost from a busy machine.

Issue 33's streaming row: the 1 GiB all persisted (caps raised) to a store on this
machine's disk, as a user's store is, against the same stream into ``cat > /dev/null``
measured in turn (target: ratio at least 0.5); the tmpfs and ``cat > file; sync`` rows
stay as diagnostics.

Why the all-persisted ratios are below 1 on 2 vCPUs: ``cat > /dev/null`` spends about
0.45-0.85 CPU-s per GiB and writes nothing. The producer also persists: its event loop reads
the pipe straight into the artifact stream (about 0.35-0.45 CPU-s/GiB: the copy out of the
pipe and the capture), a worker thread writes each 16 MiB flush into the page cache (1 MiB a
call) while the loop reads the next one (write-behind; about 0.4 CPU-s/GiB), and XXH3 names
it (about 0.05 CPU-s/GiB), plus the generator (about 0.45): about 1.3 CPU-s per GiB in all,
so about 0.65 s on both cores at best. On disk the data must also reach the disk before the
commit returns: on this VM a fresh 1 GiB file has taken from 0.8 s to 6.7 s (``dd
conv=fsync``, 1.3 GB/s to 160 MB/s, depending on the other work on the disk), which bounds
that row whatever the producer does; and with every core taken by other work, each hand-off
between the stages (pipe, loop, worker thread) waits for a core, so a loaded machine lowers
the ratio more than ``cat``'s.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

import anyio

from bench._report import Row, Target
from toolbatch.artifacts._store import DEFAULT_MAX_FILE_BYTES

AREA: Final = "shell"
FULL_BYTES: Final = 2**30
QUICK_BYTES: Final = 64 * 2**20
SMALL_BYTES: Final = 2**20
ROUNDS: Final = 3
DISK_ROUNDS: Final = 2
QUICK_ROUNDS: Final = 1
LINE: Final = b"the quick brown fox jumps over the lazy dog 0123456789\n"
RSS_TARGET_MIB: Final = 64.0
RATIO_TARGET: Final = 0.8
"""Issue 18: the default on-disk store vs ``cat > /dev/null``."""
SANDBOX_COMMANDS: Final = 200
QUICK_SANDBOX_COMMANDS: Final = 50
SANDBOX_COST_TARGET_MS: Final = 3.0
"""Issue 28: the default sandbox (bubblewrap's namespaces, Landlock inside) adds at most this."""
SHORT_COMMANDS: Final = 200
QUICK_SHORT_COMMANDS: Final = 40
SHORT_RATIO_TARGET: Final = 2.0
"""Issue 33: ``true`` through ``run_shell_command`` vs ``asyncio.create_subprocess_shell``."""
PERSISTED_RATIO_TARGET: Final = 0.5
"""Issue 33: 1 GiB all persisted (caps raised) vs ``cat > /dev/null``."""

_CHILD: Final = """
import json, sys, time
import anyio
from bench.bench_shell import child_run
print(json.dumps(anyio.run(child_run, *sys.argv[1:])))
"""


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # "5" resets VmHWM to the current RSS


async def child_run(command: str, store_dir: str, caps: str = "raised") -> dict[str, Any]:
    """Run ``command`` through a ShellProducer once; time, RSS growth and artifact size.

    ``caps`` is ``raised`` (the store keeps everything) or ``default`` (the store's
    default caps, as a user gets it)."""
    from toolbatch import ArtifactStore, ToolCall
    from toolbatch.producers import ProducerContext, ShellProducer

    if caps == "default":
        store = ArtifactStore(store_dir)
    else:
        store = ArtifactStore(store_dir, max_file_bytes=4 * 2**30, max_total_bytes=16 * 2**30)
    producer = ShellProducer()
    context = ProducerContext(store=store)
    warm = ToolCall(id="warm", name="run_shell_command", args={"command": "seq 1 20000"})
    await producer.run(warm, context)  # imports, first thread hop, first artifact
    call = ToolCall(id="bench", name="run_shell_command", args={"command": command})
    _reset_peak_rss()
    rss_before = _status_kib("VmRSS")
    started = time.perf_counter()
    result = await producer.run(call, context)
    elapsed = time.perf_counter() - started
    peak = _status_kib("VmHWM")
    paths = result.persisted_output_files or ()
    size = paths[0].stat().st_size if paths else 0
    for path in store.written:
        path.unlink(missing_ok=True)
    return {
        "elapsed_s": elapsed,
        "rss_growth_mib": (peak - rss_before) / 1024,
        "artifact_bytes": size,
        "error": None if result.error is None else result.error.message,
        "tail": result.content[-80:],
    }


async def _per_command_ms(mode: str, commands: int, layers: str = "default") -> float:
    """Milliseconds per ``true`` through the producer with sandbox ``mode``
    (``layers="landlock"``: as where bubblewrap is missing)."""
    from toolbatch import ToolCall
    from toolbatch.producers import ProducerContext, ShellProducer, open_process_policy
    from toolbatch.sandbox import find_bubblewrap

    def no_namespaces() -> tuple[str | None, str | None]:
        return None, "left out for the benchmark"

    probe = no_namespaces if layers == "landlock" else find_bubblewrap
    call = ToolCall(id="cost", name="run_shell_command", args={"command": "true"})
    with open_process_policy(sandbox=mode, namespaces_probe=probe) as policy:  # type: ignore[arg-type]
        if mode != "off" and not policy.enforced:
            raise RuntimeError(f"the sandbox is not enforced here: {policy.problem}")
        if mode != "off" and layers == "default" and not policy.namespaced:
            raise RuntimeError(f"bubblewrap is not usable here: {policy.problem}")
        producer = ShellProducer(policy=policy)
        context = ProducerContext()
        await producer.run(call, context)  # the first spawn starts the host reaper
        started = time.perf_counter()
        for _ in range(commands):
            await producer.run(call, context)
        return (time.perf_counter() - started) / commands * 1000


def _sandbox_cost(quick: bool) -> Row:
    commands = QUICK_SANDBOX_COMMANDS if quick else SANDBOX_COMMANDS
    on: list[float] = []
    landlock: list[float] = []
    off: list[float] = []
    for _ in range(QUICK_ROUNDS if quick else ROUNDS):
        on.append(anyio.run(_per_command_ms, "workspace-write", commands))
        landlock.append(anyio.run(_per_command_ms, "workspace-write", commands, "landlock"))
        off.append(anyio.run(_per_command_ms, "off", commands))
    cost = min(on) - min(off)
    return Row(
        area=AREA,
        name=(
            f"sandbox cost per command, workspace-write with bubblewrap + Landlock "
            f"({commands} x true; on {min(on):.2f} ms, Landlock alone {min(landlock):.2f} ms)"
        ),
        value=cost,
        unit="ms",
        baseline="same commands, sandbox off (per command)",
        baseline_value=min(off),
        ratio=None,
        target=f"on - off <= {SANDBOX_COST_TARGET_MS:g} ms",
        goal=Target("value", "<=", SANDBOX_COST_TARGET_MS),
    )


async def _short_command_ms(
    commands: int, sandbox: str = "workspace-write"
) -> tuple[float, float, float, float]:
    """Median milliseconds of one ``true`` through ``run_batch`` (the default sandbox, or
    ``sandbox``) and through ``asyncio.create_subprocess_shell`` with pipes, one of each in
    turn; then the median CPU milliseconds this process spent on each (its own threads
    only: not the shell, nor the sandbox's processes)."""
    import asyncio

    from toolbatch import SchedulerConfig, ToolCall, ToolScheduler, default_registry

    async def bare() -> None:
        process = await asyncio.create_subprocess_shell(
            "true", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        await process.communicate()
        assert process.returncode == 0

    ours: list[float] = []
    baseline: list[float] = []
    cpu: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="toolbatch-bench-short-") as tmp:
        config = SchedulerConfig(artifacts_dir=tmp, sandbox=sandbox)  # type: ignore[arg-type]
        async with ToolScheduler(default_registry(), config) as scheduler:
            call = ToolCall(id="t", name="run_shell_command", args={"command": "true"})
            for _ in range(5):  # the first spawn starts the host reaper
                await scheduler.run_batch([call])
                await bare()
            for index in range(commands):
                for run_ours in (index % 2 == 0, index % 2 == 1):
                    cpu_started = time.process_time()
                    started = time.perf_counter()
                    if run_ours:
                        turn = await scheduler.run_batch([call])
                        ours.append(time.perf_counter() - started)
                        assert turn.responses[0].status == "success", turn.responses[0]
                    else:
                        await bare()
                        baseline.append(time.perf_counter() - started)
                    cpu[run_ours].append(time.process_time() - cpu_started)
    return (
        statistics.median(ours) * 1000,
        statistics.median(baseline) * 1000,
        statistics.median(cpu[True]) * 1000,
        statistics.median(cpu[False]) * 1000,
    )


async def _bare_shells_ms(commands: int) -> tuple[float, float]:
    """Median milliseconds of ``bash -c true`` (the shell ``run_shell_command`` runs, started
    with ``create_subprocess_exec`` and pipes, nothing else) and of
    ``create_subprocess_shell("true")`` (``/bin/sh``, the short-command row's baseline), one
    of each in turn."""
    import asyncio

    async def one(bash: bool) -> None:
        pipe = asyncio.subprocess.PIPE
        if bash:
            process = await asyncio.create_subprocess_exec(
                "bash", "-c", "true", stdout=pipe, stderr=pipe
            )
        else:
            process = await asyncio.create_subprocess_shell("true", stdout=pipe, stderr=pipe)
        await process.communicate()
        assert process.returncode == 0

    times: dict[bool, list[float]] = {True: [], False: []}
    for index in range(commands):
        for bash in (index % 2 == 0, index % 2 == 1):
            started = time.perf_counter()
            await one(bash)
            times[bash].append(time.perf_counter() - started)
    return statistics.median(times[True]) * 1000, statistics.median(times[False]) * 1000


def _short_command(quick: bool) -> list[Row]:
    commands = QUICK_SHORT_COMMANDS if quick else SHORT_COMMANDS
    ours, bare, ours_cpu, bare_cpu = anyio.run(_short_command_ms, commands)
    off, off_bare, _, _ = anyio.run(_short_command_ms, commands, "off")
    bash, sh = anyio.run(_bare_shells_ms, commands)
    return [
        Row(
            area=AREA,
            name=f"one `true` through run_shell_command, default sandbox (median of {commands})",
            value=ours,
            unit="ms",
            baseline='asyncio.create_subprocess_shell("true"), pipes read',
            baseline_value=bare,
            ratio=ours / bare,
            target=f"ratio <= {SHORT_RATIO_TARGET:g} (ours/bare time per call)",
            goal=Target("ratio", "<=", SHORT_RATIO_TARGET),
        ),
        Row(
            area=AREA,
            name=f"diagnostic: one `true` through run_shell_command, sandbox off "
            f"(median of {commands})",
            value=off,
            unit="ms",
            baseline='asyncio.create_subprocess_shell("true"), pipes read',
            baseline_value=off_bare,
            ratio=off / off_bare,
            target="diagnostic (the host's own overhead, included in the row above)",
        ),
        Row(
            area=AREA,
            name="diagnostic: this process's CPU per `true` through run_shell_command, "
            f"default sandbox (median of {commands})",
            value=ours_cpu,
            unit="ms",
            baseline='asyncio.create_subprocess_shell("true") (forks /bin/sh from here)',
            baseline_value=bare_cpu,
            ratio=ours_cpu / bare_cpu,
            target="diagnostic (the host's share of the row above, whatever the load)",
        ),
        Row(
            area=AREA,
            name=f"diagnostic: bare `bash -c true` (the shell the tool runs), no toolbatch "
            f"(median of {commands})",
            value=bash,
            unit="ms",
            baseline='asyncio.create_subprocess_shell("true") (/bin/sh), pipes read',
            baseline_value=sh,
            ratio=bash / sh,
            target="diagnostic (the floor of the 2x row: bash's own start against sh's)",
        ),
    ]


def _run_child(command: str, store_dir: Path, caps: str = "raised") -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, command, str(store_dir), caps],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    measured: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def _time_shell(script: str) -> float:
    started = time.perf_counter()
    subprocess.run(["bash", "-c", script], check=True)
    return time.perf_counter() - started


def _write_source(path: Path, size: int) -> None:
    block = LINE * (2**20 // len(LINE) + 1)
    with open(path, "wb") as file:
        left = size
        while left:
            piece = block[: min(left, len(block))]
            file.write(piece)
            left -= len(piece)


def _scratch_root() -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return shm
    return Path(tempfile.gettempdir())


def run(quick: bool) -> list[Row]:
    size = QUICK_BYTES if quick else FULL_BYTES
    rounds = QUICK_ROUNDS if quick else ROUNDS
    disk_rounds = QUICK_ROUNDS if quick else DISK_ROUNDS
    label = f"{size / 2**30:g} GiB" if size >= 2**30 else f"{size // 2**20} MiB"
    # The per-command rows first: after the streams below, the disk's writeback of their
    # gigabytes slowed every spawn for a while (once 6.9 ms per `true` instead of 2-3).
    sandbox = _sandbox_cost(quick)
    short = _short_command(quick)
    fast = Path(tempfile.mkdtemp(prefix="toolbatch-bench-shell-", dir=_scratch_root()))
    disk = Path(tempfile.mkdtemp(prefix="toolbatch-bench-shell-"))
    try:
        source = fast / "stream.txt"
        _write_source(source, size)
        stream = f"cat {source}"
        small = f"head -c {SMALL_BYTES} {source}"
        default_ours: list[float] = []
        default_cats: list[float] = []
        for _ in range(rounds):
            default_cats.append(_time_shell(f"{stream} | cat > /dev/null"))
            measured = _run_child(stream, disk / "default-store", "default")
            kept = min(size, DEFAULT_MAX_FILE_BYTES)
            if measured["artifact_bytes"] != kept or measured["error"] is not None:
                raise RuntimeError(f"the producer did not keep the store's share: {measured}")
            default_ours.append(measured["elapsed_s"])
            shutil.rmtree(disk / "default-store", ignore_errors=True)
        ours: list[float] = []
        cats: list[float] = []
        growth: list[float] = []
        for _ in range(rounds):
            cats.append(_time_shell(f"{stream} | cat > /dev/null"))
            measured = _run_child(stream, fast / "store")
            if measured["artifact_bytes"] != size or measured["error"] is not None:
                raise RuntimeError(f"the producer did not persist the whole stream: {measured}")
            ours.append(measured["elapsed_s"])
            growth.append(measured["rss_growth_mib"])
        small_growth = _run_child(small, fast / "store")["rss_growth_mib"]
        disk_ours: list[float] = []
        disk_cats: list[float] = []
        disk_null_cats: list[float] = []
        for _ in range(disk_rounds):
            disk_null_cats.append(_time_shell(f"{stream} | cat > /dev/null"))
            target = disk / "copy.txt"
            disk_cats.append(_time_shell(f"{stream} | cat > {target} && sync {target}"))
            target.unlink()
            measured = _run_child(stream, disk / "store")
            if measured["artifact_bytes"] != size or measured["error"] is not None:
                raise RuntimeError(f"the producer did not persist the whole stream: {measured}")
            disk_ours.append(measured["elapsed_s"])
            shutil.rmtree(disk / "store", ignore_errors=True)
    finally:
        shutil.rmtree(fast, ignore_errors=True)
        shutil.rmtree(disk, ignore_errors=True)
    mib = size / 2**20
    ours_rate, cat_rate = mib / min(ours), mib / min(cats)
    disk_rate, disk_cat_rate = mib / min(disk_ours), mib / min(disk_cats)
    ratio = ours_rate / cat_rate
    default_rate, default_cat_rate = mib / min(default_ours), mib / min(default_cats)
    disk_ratio = disk_rate / disk_cat_rate
    disk_null_rate = mib / min(disk_null_cats)
    peak = max(growth)
    return [
        Row(
            area=AREA,
            name=f"{label}, all persisted (caps raised, store on disk)",
            value=disk_rate,
            unit="MiB/s",
            baseline="same stream | cat > /dev/null",
            baseline_value=disk_null_rate,
            ratio=disk_rate / disk_null_rate,
            target=f"ratio >= {PERSISTED_RATIO_TARGET:g} (ours/cat throughput)",
            goal=Target("ratio", ">=", PERSISTED_RATIO_TARGET),
        ),
        Row(
            area=AREA,
            name=f"{label} through the producer (default on-disk store)",
            value=default_rate,
            unit="MiB/s",
            baseline="same command | cat > /dev/null",
            baseline_value=default_cat_rate,
            ratio=default_rate / default_cat_rate,
            target=f"ratio >= {RATIO_TARGET} (ours/cat throughput)",
            goal=Target("ratio", ">=", RATIO_TARGET),
        ),
        Row(
            area=AREA,
            name=f"diagnostic: {label}, all persisted (caps raised, store on tmpfs)",
            value=ours_rate,
            unit="MiB/s",
            baseline="same stream | cat > /dev/null",
            baseline_value=cat_rate,
            ratio=ratio,
            target="diagnostic (the whole capture path without a disk)",
        ),
        Row(
            area=AREA,
            name=f"peak RSS growth, {label} output",
            value=peak,
            unit="MiB",
            baseline=f"{SMALL_BYTES // 2**20} MiB output",
            baseline_value=small_growth,
            ratio=None,
            target=f"<= {RSS_TARGET_MIB:g} MiB",
            goal=Target("value", "<=", RSS_TARGET_MIB),
        ),
        Row(
            area=AREA,
            name=f"diagnostic: {label}, all persisted (caps raised, store on disk)",
            value=disk_rate,
            unit="MiB/s",
            baseline="same stream | cat > file; sync file",
            baseline_value=disk_cat_rate,
            ratio=disk_ratio,
            target="diagnostic (the same disk work done by coreutils)",
        ),
        sandbox,
        *short,
    ]
