"""Many sessions at once: 100 sessions x 3 batches, each answer in its own session, in
call order and within the budget; closing the pool leaves nothing running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from tests.ray._tools import mcp_document, shell_and_pid
from tests.ray.conftest import background_sleep, descendants, pid_pipe, read_pid, wait_gone
from tests.ray.test_session import shell
from toolbatch import SchedulerConfig
from toolbatch.ray import SessionPool

SESSIONS = 100
BATCHES = 3
BUDGET = 3_000
# 25 sessions per host, 4 hosts: a host is a worker process, and starting one costs about 1 s
# of this 2-core machine's CPU (100 hosts would take ~2 minutes; see toolbatch/ray/README.md).
# Four hosts still run the sessions on several processes at once.
PER_HOST = 25


def _output(response: Any) -> str:
    return str(response.parts[0].function_response.response.get("output", ""))


async def test_hundred_sessions_three_batches_each(tmp_path: Path) -> None:
    """Every session runs three batches concurrently with all the others: each response
    answers its own call, in call order, in its own session's workspace; every turn is
    within the budget; every big output was persisted on its session's host."""
    config = SchedulerConfig(batch_budget=BUDGET)
    turns: dict[tuple[int, int], Any] = {}
    async with SessionPool(
        SESSIONS, shell_and_pid, config, sessions_per_host=PER_HOST, workspace_dir=tmp_path
    ) as pool:
        assert len(pool) == SESSIONS
        assert len(pool.hosts) == SESSIONS // PER_HOST
        workspaces = [session.workspace for session in pool]
        assert len(set(workspaces)) == SESSIONS

        async def drive(index: int) -> None:
            session = pool[index]
            for batch in range(BATCHES):
                tag = f"s{index}-b{batch}"
                calls = [
                    shell(f"{tag}-echo", f"echo {tag}; pwd"),
                    shell(f"{tag}-big", f"seq 1 {2_000 + index}"),
                    {"id": f"{tag}-pid", "name": "host_pid", "args": {}},
                    shell(f"{tag}-file", f"echo {tag} >> log; wc -l < log"),
                ]
                turns[index, batch] = (calls, await session.run_batch(calls))

        async with anyio.create_task_group() as tg:
            for index in range(SESSIONS):
                tg.start_soon(drive, index)
        host_pids = {await host.pid.remote() for host in pool.hosts}
    assert len(turns) == SESSIONS * BATCHES
    for (index, batch), (calls, turn) in turns.items():
        tag = f"s{index}-b{batch}"
        assert [r.call_id for r in turn.responses] == [c["id"] for c in calls]
        assert [r.status for r in turn.responses] == ["success"] * 4
        assert turn.content_length <= BUDGET
        echo, big, pid, log = (_output(r) for r in turn.responses)
        assert echo.startswith(f"{tag}\n{workspaces[index]}\n")
        assert int(pid) in host_pids
        assert log.startswith(f"{batch + 1}\n")  # its own workspace, its earlier batches
        (saved,) = turn.responses[1].persisted_output_files or ()
        assert saved.read_text().split("\n")[2_000 + index - 1] == str(2_000 + index)
        assert "[exit code: 0]" in big
    assert wait_gone(sorted(host_pids)) == []


async def test_closed_pool_leaves_nothing_running(tmp_path: Path) -> None:
    """Closing a pool while a batch runs stops everything its sessions started: hosts, MCP
    servers, reapers and the running command; temporary workspaces are removed."""
    config = SchedulerConfig(mcp_servers=mcp_document())
    pipe = pid_pipe(tmp_path)
    answers: list[Any] = []
    pool = SessionPool(3, shell_and_pid, config, sessions_per_host=2)
    async with anyio.create_task_group() as tg, pool:
        assert len(pool.hosts) == 2
        hosts = [await host.pid.remote() for host in pool.hosts]
        servers = []
        for session in pool:
            name = next(d.name for d in session.declarations() if d.name.endswith("__pid"))
            turn = await session.run_batch([{"id": "m", "name": name, "args": {}}])
            servers.append(int(_output(turn.responses[0])))
        started = [pid for host in hosts for pid in descendants(host)]
        workspaces = [Path(session.workspace) for session in pool]
        assert all(path.is_dir() for path in workspaces)

        async def run() -> None:
            command = f"{background_sleep(pipe)}; wait"
            answers.append(await pool[2].run_batch([shell("bg", command)]))

        tg.start_soon(run)
        sleeper = await read_pid(pipe)
    # The pool was closed while the batch ran (the task group waits for its answer).
    assert set(servers) <= set(started)
    assert wait_gone([*hosts, *started, sleeper]) == []
    assert [path.exists() for path in workspaces] == [False] * 3
    assert [session.state for session in pool] == ["closed"] * 3
    assert answers[0].responses[0].status == "cancelled"  # answered by its host, then closed
