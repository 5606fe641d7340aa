"""The shell producer: real bash, real pipes, real files, the process tree checked in /proc."""

from __future__ import annotations

import hashlib
import math
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from toolbatch import ArtifactStore, ToolCall, ToolResult
from toolbatch.errors import ConfigError
from toolbatch.producers import Producer, ProducerContext, ShellProducer

FAST: dict[str, Any] = {"kill_grace_s": 0.3, "drain_s": 0.3}
"""Short grace and drain so the kill paths stay quick in tests."""


def _call(command: str | None = None, **args: Any) -> ToolCall:
    if command is not None:
        args["command"] = command
    return ToolCall(id="call-1", name="run_shell_command", args=args)


async def _run(
    command: str,
    *,
    producer: ShellProducer | None = None,
    store: ArtifactStore | None = None,
    context: ProducerContext | None = None,
    **args: Any,
) -> ToolResult:
    producer = producer or ShellProducer(**FAST)
    context = context or ProducerContext(store=store)
    return await producer.run(_call(command, **args), context)


def _live_group_members(pgid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process of group ``pgid`` that is not a zombie, from /proc.

    Zombies are dead: a member orphaned to a PID 1 that does not reap (this VM's init does
    not) stays in /proc as state Z, holding only its pid.
    """
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append((int(name), fields[0].decode()))
    return members


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return state[state.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


async def _read_fifo(fifo: Path) -> str:
    """The first line a command writes to ``fifo`` (blocks until it does: an event)."""
    with anyio.fail_after(10):
        return await anyio.to_thread.run_sync(fifo.read_text, abandon_on_cancel=True)


def _exit_line(result: ToolResult) -> str:
    assert isinstance(result.content, str)
    return result.content.rsplit("\n", 1)[-1]


def _sha256_of_command(command: str, *, limit: int | None = None) -> tuple[str, int]:
    """The sha256 of what ``command`` prints (of its first ``limit`` bytes) and its size."""
    digest = hashlib.sha256()
    total = 0
    with subprocess.Popen(["bash", "-c", command], stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        while block := process.stdout.read(2**20):
            if limit is None or total < limit:
                digest.update(block if limit is None else block[: limit - total])
            total += len(block)
    assert process.returncode == 0
    return digest.hexdigest(), total


def _sha256_of_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(8 * 2**20):
            digest.update(block)
    return digest.hexdigest()


# -- the declaration ----------------------------------------------------------------------


def test_is_a_producer_declaring_run_shell_command() -> None:
    """It satisfies the Producer protocol and declares command (required), cwd, timeout."""
    producer = ShellProducer()
    assert isinstance(producer, Producer)
    declaration = producer.declaration
    assert declaration.name == "run_shell_command"
    assert declaration.needs_permission is True
    schema = declaration.input_schema
    assert schema["required"] == ["command"]
    assert set(schema["properties"]) == {"command", "cwd", "timeout", "description"}  # type: ignore[arg-type]
    assert schema["additionalProperties"] is False
    assert "30,000 characters" in declaration.description
    assert "stopped when it ends" in declaration.description
    assert "stopped" not in ShellProducer(kill_background=False).declaration.description


@pytest.mark.parametrize(
    ("options", "named"),
    [
        pytest.param({"output_trigger_chars": -2}, "output_trigger_chars", id="trigger"),
        pytest.param({"preview_chars": 10}, "preview_chars", id="preview"),
        pytest.param({"default_timeout_s": 0}, "default_timeout_s", id="default-timeout"),
        pytest.param({"default_timeout_s": 900}, "default_timeout_s", id="default-over-max"),
        pytest.param({"kill_grace_s": math.inf}, "kill_grace_s", id="grace"),
        pytest.param({"drain_s": -1}, "drain_s", id="drain"),
        pytest.param({"shell": ""}, "shell", id="shell"),
    ],
)
def test_bad_options_raise_config_error_naming_them(options: dict[str, Any], named: str) -> None:
    """A bad constructor option is a ConfigError whose message names the option."""
    with pytest.raises(ConfigError, match=named):
        ShellProducer(**options)


# -- exit information ---------------------------------------------------------------------


async def test_output_and_exit_code_zero() -> None:
    """A successful command gives its output whole and ends with its exit code."""
    result = await _run("echo hello")
    assert result.content == "hello\n[exit code: 0]"
    assert result.error is None
    assert result.persisted_output_files is None
    assert result.display == result.content


async def test_stdout_and_stderr_are_merged_in_the_order_written() -> None:
    """stderr lines land between stdout lines exactly where the command wrote them."""
    result = await _run("echo one; echo two >&2; echo three; echo four >&2")
    assert result.content == "one\ntwo\nthree\nfour\n[exit code: 0]"


async def test_non_zero_exit_is_a_normal_result_stating_the_code() -> None:
    """A failing command is not a tool failure: the model reads the code at the end."""
    result = await _run("echo 'build failed' >&2; exit 3")
    assert result.error is None
    assert result.content == "build failed\n[exit code: 3]"


@pytest.mark.parametrize(
    ("command", "exit_line"),
    [
        pytest.param("kill -TERM $$", "[killed by signal SIGTERM (15)]", id="leader-term"),
        pytest.param("kill -KILL $$", "[killed by signal SIGKILL (9)]", id="leader-kill"),
        pytest.param(
            "bash -c 'kill -SEGV $$'; exit $?",
            "[exit code: 139 (128+11: a command was killed by SIGSEGV)]",
            id="child-segv",
        ),
    ],
)
async def test_death_by_signal_is_stated_at_the_end(command: str, exit_line: str) -> None:
    """A command killed by a signal names the signal in its exit line."""
    result = await _run(f"echo before; {command}")
    assert result.error is None
    assert isinstance(result.content, str)
    assert result.content.startswith("before\n")
    assert _exit_line(result) == exit_line


async def test_empty_output_gets_a_status_line() -> None:
    """No output: the model and the user see a status line, not an empty string."""
    result = await _run("true")
    assert result.content == "(no output)\n[exit code: 0]"
    assert result.display == "(no output)\n[exit code: 0]"
    assert result.persisted_output_files is None


async def test_stdin_is_dev_null() -> None:
    """A command reading stdin sees EOF at once instead of hanging on the agent's stdin."""
    with anyio.fail_after(10):
        result = await _run("cat; echo done")
    assert result.content == "done\n[exit code: 0]"


async def test_env_and_cwd_options(tmp_path: Path) -> None:
    """env replaces the environment; a relative cwd resolves against the producer's cwd."""
    (tmp_path / "sub").mkdir()
    producer = ShellProducer(env={"FOO": "bar", "PATH": os.environ["PATH"]}, cwd=tmp_path)
    result = await _run('echo "$FOO $HOME"; pwd', producer=producer, cwd="sub")
    assert result.content == f"bar \n{tmp_path / 'sub'}\n[exit code: 0]"
    inherited = await _run("pwd", producer=ShellProducer(cwd=tmp_path))
    assert inherited.content == f"{tmp_path}\n[exit code: 0]"


async def test_progress_is_reported_while_a_command_runs() -> None:
    """A long command reports progress; the abort event then ends it with partial output."""
    context = ProducerContext()
    messages: list[str] = []

    def progress(message: str) -> None:
        messages.append(message)
        context.cancelled.set()

    context.progress = progress
    with anyio.fail_after(10):
        result = await _run("while :; do echo tick; sleep 0.05; done", context=context)
    assert messages
    assert "of output so far" in messages[0]
    assert result.error is not None
    assert result.error.type == "cancelled"
    assert result.content.startswith("tick\ntick\n")
    assert _exit_line(result).startswith("[cancelled; ")


async def test_concurrent_calls_keep_their_own_output() -> None:
    """Calls run side by side do not mix their output."""
    results: dict[int, ToolResult] = {}
    producer = ShellProducer()

    async def one(index: int) -> None:
        results[index] = await _run(f"sleep 0.1; seq {index} {index + 2}", producer=producer)

    async with anyio.create_task_group() as tg:
        for index in range(5):
            tg.start_soon(one, index)
    for index, result in results.items():
        expected = "".join(f"{n}\n" for n in range(index, index + 3))
        assert result.content == f"{expected}[exit code: 0]"


async def test_a_call_cancelled_before_it_starts_runs_nothing(tmp_path: Path) -> None:
    """An abort already set: no command runs, the result says it was cancelled."""
    context = ProducerContext()
    context.cancelled.set()
    marker = tmp_path / "ran"
    result = await _run(f"touch {marker}", context=context)
    assert result.error is not None
    assert result.error.type == "cancelled"
    assert not marker.exists()


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "named"),
    [
        pytest.param({}, "None", id="missing-command"),
        pytest.param({"command": ""}, "''", id="empty-command"),
        pytest.param({"command": "   "}, "'   '", id="blank-command"),
        pytest.param({"command": 5}, "5", id="command-not-str"),
        pytest.param({"command": "ls", "cwd": "/no/such/dir"}, "/no/such/dir", id="cwd-missing"),
        pytest.param({"command": "ls", "cwd": "/etc/hostname"}, "/etc/hostname", id="cwd-file"),
        pytest.param({"command": "ls", "cwd": 7}, "7", id="cwd-not-str"),
        pytest.param({"command": "ls", "timeout": 0}, "got 0", id="timeout-zero"),
        pytest.param({"command": "ls", "timeout": -5}, "got -5", id="timeout-negative"),
        pytest.param({"command": "ls", "timeout": 601}, "got 601", id="timeout-over-max"),
        pytest.param({"command": "ls", "timeout": "30"}, "got '30'", id="timeout-str"),
        pytest.param({"command": "ls", "timeout": True}, "got True", id="timeout-bool"),
        pytest.param({"command": "ls", "bogus": 1}, "'bogus'", id="unknown-arg"),
        pytest.param({"command": "ls", "description": 3}, "3", id="description-not-str"),
        pytest.param({"command": "echo \0"}, "NUL", id="nul-byte"),
    ],
)
async def test_bad_arguments_are_an_invalid_args_result(args: dict[str, Any], named: str) -> None:
    """Bad input never raises: it is a failure naming the bad value, with the fix."""
    result = await ShellProducer().run(_call(**args), ProducerContext())
    assert result.error is not None
    assert result.error.type == "invalid_args"
    assert named in result.error.message


async def test_a_cwd_that_cannot_be_reached_is_an_invalid_args_result(tmp_path: Path) -> None:
    """A cwd the system refuses to resolve (a symlink loop) is named with the reason."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    result = await ShellProducer().run(_call(command="ls", cwd=str(loop)), ProducerContext())
    assert result.error is not None
    assert result.error.type == "invalid_args"
    assert str(loop) in result.error.message
    assert "symbolic links" in result.error.message


async def test_a_shell_that_cannot_start_is_an_execution_failure(tmp_path: Path) -> None:
    """A missing shell program is a failed result, not an exception."""
    result = await _run("echo hi", producer=ShellProducer(shell=str(tmp_path / "no-bash")))
    assert result.error is not None
    assert result.error.type == "execution_failed"
    assert "no-bash" in result.error.message


async def test_a_command_over_the_kernels_argument_limit_says_so() -> None:
    """A 200,000-byte command: "argument list too long" and what to do, not "is the shell
    installed"."""
    result = await _run("echo " + "x" * 200_000)
    assert result.error is not None
    assert result.error.type == "invalid_args"
    assert "argument list too long" in result.error.message
    assert "200,005 bytes" in result.error.message
    assert "shell is installed" not in result.error.message


# -- timeouts, cancellation, process trees ------------------------------------------------


async def test_timeout_returns_partial_output_and_kills_the_group(tmp_path: Path) -> None:
    """On timeout the partial output comes back, the reason is last, and the group is gone."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        results: list[ToolResult] = []

        async def call() -> None:
            command = f'echo partial; sleep 60 & sleep 60 & echo "$$" > {fifo}; wait'
            results.append(await _run(command, timeout=0.5))

        tg.start_soon(call)
        pgid = int(await _read_fifo(fifo))
        assert len(_live_group_members(pgid)) >= 3
    (result,) = results
    assert time.monotonic() - started < 5
    assert result.error is not None
    assert result.error.type == "timeout"
    assert "0.5 s" in result.error.message
    assert result.content.startswith("partial\n")
    assert _exit_line(result) == "[timed out after 0.5 s; its processes were stopped with SIGTERM]"
    assert _live_group_members(pgid) == []


async def test_context_timeout_caps_the_call_timeout() -> None:
    """The runtime's context.timeout_s wins when it is shorter than the call's timeout."""
    result = await _run("sleep 30", context=ProducerContext(timeout_s=0.3), timeout=20)
    assert result.error is not None
    assert result.error.type == "timeout"
    assert _exit_line(result).startswith("[timed out after 0.3 s;")


async def test_a_command_that_closes_its_output_early_still_times_out() -> None:
    """Output closed at once, leader still running: the timeout stops it all the same."""
    started = time.monotonic()
    result = await _run("echo before; exec >/dev/null 2>&1; sleep 30", timeout=0.3)
    assert time.monotonic() - started < 5
    assert result.error is not None
    assert result.error.type == "timeout"
    assert result.content.startswith("before\n")
    assert _exit_line(result).startswith("[timed out after 0.3 s;")


async def test_a_timeout_shorter_than_the_quick_window_is_kept() -> None:
    """A timeout shorter than the quick window (10 ms) still ends the command as a timeout."""
    result = await _run("sleep 30", timeout=0.01)
    assert result.error is not None
    assert result.error.type == "timeout"
    assert _exit_line(result).startswith("[timed out after 0.01 s;")


async def test_a_child_that_traps_term_is_killed_by_the_escalation(tmp_path: Path) -> None:
    """A child ignoring SIGTERM gets SIGKILL after the grace; nothing of the group is left."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    results: list[ToolResult] = []
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            command = f"(trap '' TERM; echo \"$$ $BASHPID\" > {fifo}; exec sleep 60) & wait"
            results.append(await _run(command, timeout=0.5))

        tg.start_soon(call)
        pgid, stubborn = map(int, (await _read_fifo(fifo)).split())
    (result,) = results
    assert _exit_line(result) == (
        "[timed out after 0.5 s; its processes were sent SIGTERM, then SIGKILL after 0.3 s]"
    )
    assert not _alive(stubborn)
    assert _live_group_members(pgid) == []


async def test_outside_cancellation_kills_the_tree_then_propagates(tmp_path: Path) -> None:
    """Cancelling the caller's task stops every process of the group before it propagates."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    returned = anyio.Event()
    # Every process is forked before the subshell reports the group id.
    command = f'sleep 60 & (sleep 60 & sleep 60 & echo "$$" > {fifo}; wait) & wait'
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            await _run(command)
            returned.set()

        tg.start_soon(call)
        pgid = int(await _read_fifo(fifo))
        before = _live_group_members(pgid)
        tg.cancel_scope.cancel()
    assert len(before) >= 5
    assert not returned.is_set()
    assert _live_group_members(pgid) == []


async def test_the_abort_event_cancels_with_partial_output(tmp_path: Path) -> None:
    """context.cancelled stops the command and returns what it printed, type cancelled."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    context = ProducerContext()
    results: list[ToolResult] = []
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            command = f'echo so far; sleep 60 & echo "$$" > {fifo}; wait'
            results.append(await _run(command, context=context))

        tg.start_soon(call)
        pgid = int(await _read_fifo(fifo))
        context.cancelled.set()
    (result,) = results
    assert result.error is not None
    assert result.error.type == "cancelled"
    assert result.content.startswith("so far\n")
    assert _exit_line(result) == "[cancelled; its processes were stopped with SIGTERM]"
    assert _live_group_members(pgid) == []


async def test_a_background_child_holding_the_pipe_does_not_hang_the_call() -> None:
    """A backgrounded child keeping stdout open costs the drain, then is stopped."""
    started = time.monotonic()
    result = await _run('sleep 60 & echo "$!"')
    elapsed = time.monotonic() - started
    assert elapsed < 5
    assert isinstance(result.content, str)
    child = int(result.content.split("\n", 1)[0])
    assert not _alive(child)
    assert result.error is None
    assert "a background process kept the output pipe open" in result.content
    assert "processes the command left running in the background were stopped" in result.content
    assert _exit_line(result) == "[exit code: 0]"


async def test_background_processes_may_outlive_the_call_when_asked() -> None:
    """kill_background=False leaves a redirected background job running."""
    producer = ShellProducer(kill_background=False, **FAST)
    result = await _run('sleep 60 > /dev/null 2>&1 & echo "$!"', producer=producer)
    assert isinstance(result.content, str)
    child = int(result.content.split("\n", 1)[0])
    try:
        assert _alive(child)
        assert result.content == f"{child}\n[exit code: 0]"
    finally:
        os.kill(child, signal.SIGKILL)


async def test_a_process_that_left_the_group_cannot_hang_the_call() -> None:
    """A setsid escapee holding the pipe is outside the group: the drain bounds the wait."""
    started = time.monotonic()
    result = await _run('setsid sleep 60 & echo "$!"')
    assert time.monotonic() - started < 5
    assert isinstance(result.content, str)
    escaped = int(result.content.split("\n", 1)[0])
    try:
        assert "kept the output pipe open" in result.content
        assert _exit_line(result) == "[exit code: 0]"
        assert _alive(escaped)  # documented limit: only a cgroup would catch it
    finally:
        os.kill(escaped, signal.SIGKILL)


# -- the trigger, the preview and the artifact --------------------------------------------


@pytest.mark.parametrize(
    ("char", "count", "over"),
    [
        pytest.param("x", 30_000, False, id="ascii-at-trigger"),
        pytest.param("x", 30_001, True, id="ascii-one-over"),
        pytest.param("é", 30_000, False, id="two-byte-at-trigger"),
        pytest.param("é", 30_001, True, id="two-byte-one-over"),
        pytest.param("😀", 30_000, False, id="four-byte-at-trigger"),
    ],
)
async def test_trigger_counts_characters(tmp_path: Path, char: str, count: int, over: bool) -> None:
    """Output exactly at the trigger is whole; one character over is a preview plus a file."""
    source = tmp_path / "out.txt"
    source.write_text(char * count, encoding="utf-8")
    store = ArtifactStore(tmp_path / "artifacts")
    result = await _run(f"cat {source}", store=store)
    assert isinstance(result.content, str)
    assert result.content.endswith("\n[exit code: 0]")
    if not over:
        assert result.content == char * count + "\n[exit code: 0]"
        assert result.persisted_output_files is None
        assert store.written == ()
        return
    (path,) = store.written
    assert result.persisted_output_files == (path,)
    assert path.read_bytes() == source.read_bytes()
    assert str(path) in result.content
    assert 3_800 <= len(result.content) <= 4_600
    assert result.content.startswith(f"Tool output truncated.\nFull output: {path}\n")
    assert f"The output is {len(source.read_bytes()):,} bytes" in result.content
    assert str(path) in str(result.display)


async def test_preview_keeps_the_head_the_end_and_the_exit_code(tmp_path: Path) -> None:
    """Over the trigger the preview shows whole first and last lines and how much is omitted."""
    store = ArtifactStore(tmp_path)
    result = await _run("seq 1 100000; exit 4", store=store)
    assert isinstance(result.content, str)
    assert result.content.endswith("\n99999\n100000\n[exit code: 4]")
    expected = "".join(f"{n}\n" for n in range(1, 100_001))
    total = len(expected)
    body = result.content.split("\n\n", 1)[1].removesuffix("[exit code: 4]")
    omitted = re.search(r"\n\[\.\.\. ([\d,]+) bytes omitted \.\.\.\]\n", body)
    assert omitted is not None
    head, tail = body[: omitted.start()], body[omitted.end() :]
    assert head.startswith("1\n2\n3\n4\n")
    assert expected.startswith(head)
    assert expected.endswith(tail)
    assert int(omitted.group(1).replace(",", "")) == total - len(head) - len(tail)
    assert isinstance(result.display, str)
    assert 60_000 <= len(result.display) <= 70_000
    assert result.display.endswith(
        "100000\n" + f"Output too long ({total:,} bytes); "
        f"the full output was saved to: {store.written[0]}\n"
        "[exit code: 4]"
    )


async def test_a_trickle_of_small_writes_keeps_an_exact_tail(tmp_path: Path) -> None:
    """Thousands of tiny writes (one per line) still give the exact end and a whole file."""
    store = ArtifactStore(tmp_path)
    producer = ShellProducer(output_trigger_chars=1_000, preview_chars=1_000)
    command = "for i in $(seq 1 3000); do printf 'line %d\\n' $i; done"
    result = await _run(command, producer=producer, store=store)
    expected = "".join(f"line {i}\n" for i in range(1, 3001))
    (path,) = store.written
    assert path.read_text() == expected
    assert isinstance(result.content, str)
    tail = result.content.removesuffix("[exit code: 0]").split(" bytes omitted ...]\n")[1]
    assert expected.endswith(tail)
    assert len(tail) > 400


async def test_over_the_trigger_without_a_store_gives_the_preview_and_no_path() -> None:
    """No store: a preview without a path, persisted_output_files=() (decided, no file)."""
    result = await _run("seq 1 100000")
    assert result.persisted_output_files == ()
    assert "\nThe full output was not saved: no artifact store is configured.\n" in result.content
    assert _exit_line(result) == "[exit code: 0]"
    assert len(result.content) <= 4_600


async def test_a_failed_artifact_write_gives_the_preview_and_no_path(small_fs: Path) -> None:
    """A full disk (a real 1 MiB tmpfs) loses the file, not the preview: ()."""
    store = ArtifactStore(small_fs / "primary", fallback_dir=small_fs / "fallback")
    result = await _run("seq 1 1000000", store=store)
    assert result.persisted_output_files == ()
    assert "saving it failed" in result.content
    assert result.content.endswith("1000000\n[exit code: 0]")
    assert store.written == ()
    assert list((small_fs / "primary").iterdir()) == []


async def test_trigger_can_be_disabled(tmp_path: Path) -> None:
    """output_trigger_chars=-1 gives the model the whole output and writes no artifact."""
    store = ArtifactStore(tmp_path)
    producer = ShellProducer(output_trigger_chars=-1)
    result = await _run("seq 1 100000", producer=producer, store=store)
    expected = "".join(f"{n}\n" for n in range(1, 100_001))
    assert result.content == expected + "[exit code: 0]"
    assert result.persisted_output_files is None
    assert store.written == ()


async def test_invalid_utf8_is_replaced_and_counted() -> None:
    """Invalid bytes become U+FFFD and the output says how many were replaced."""
    result = await _run(r"printf 'caf\xc3\xa9 \xff\xfe ok\n'")
    assert result.content == (
        "café \ufffd\ufffd ok\n[2 invalid UTF-8 bytes were replaced with U+FFFD]\n[exit code: 0]"
    )


async def test_binary_output_is_described_and_saved_raw(tmp_path: Path) -> None:
    """NUL bytes early on: the model is told it is binary and its size; the bytes go to a file."""
    source = tmp_path / "blob"
    source.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + os.urandom(5_000))
    store = ArtifactStore(tmp_path / "artifacts")
    result = await _run(f"cat {source}", store=store)
    (path,) = store.written
    assert path.suffix == ".bin"
    assert path.read_bytes() == source.read_bytes()
    assert result.persisted_output_files == (path,)
    assert result.content == (
        f"[binary output: 5,016 bytes, not shown; the full output was saved to: {path}]\n"
        "[exit code: 0]"
    )


@pytest.mark.slow
async def test_200_mb_output_leaves_one_byte_identical_artifact(tmp_path: Path) -> None:
    """With the cap raised, 200 MB of output is saved whole, byte for byte, in one file."""
    command = "seq 1 24000000"
    expected_digest, expected_size = _sha256_of_command(command)
    assert expected_size > 200_000_000
    store = ArtifactStore(tmp_path, max_file_bytes=2**30, max_total_bytes=2**31)
    result = await _run(command, store=store)
    (path,) = store.written
    assert result.persisted_output_files == (path,)
    assert path.stat().st_size == expected_size
    assert _sha256_of_file(path) == expected_digest
    assert f"The output is {expected_size:,} bytes" in result.content
    assert result.content.endswith("23999999\n24000000\n[exit code: 0]")
    assert "not saved" not in result.content


async def test_output_over_the_store_cap_keeps_exactly_the_cap(tmp_path: Path) -> None:
    """With the default 64 MiB cap the file holds the first 64 MiB; the preview names the rest."""
    command = "seq 1 10000000"
    cap = 64 * 2**20
    store = ArtifactStore(tmp_path)
    assert store.max_file_bytes == cap
    expected_digest, total = _sha256_of_command(command, limit=cap)
    result = await _run(command, store=store)
    (path,) = store.written
    assert path.stat().st_size == cap
    assert _sha256_of_file(path) == expected_digest
    assert result.persisted_output_files == (path,)
    assert f"Full output: {path}\nOnly its first {cap:,} bytes are in that file" in result.content
    assert f"({total - cap:,} bytes were not saved" in result.content
    assert result.content.endswith("9999999\n10000000\n[exit code: 0]")
