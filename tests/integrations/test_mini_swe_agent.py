"""ToolbatchEnvironment under mini-swe-agent's own agent and mini.yaml, with its test models."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integrations._support import (
    BIG_COMMAND,
    BUDGET,
    INTEGRATIONS,
    SMALL_COMMAND,
    alive,
    check_bounded,
    pid_command,
    requires,
    running_pid,
)

# mini-swe-agent and toolbatch's module over it are imported where a test runs.
pytestmark = [INTEGRATIONS, requires("minisweagent")]

ENVIRONMENT = "toolbatch.integrations.mini_swe_agent.ToolbatchEnvironment"
AGENT = "toolbatch.integrations.mini_swe_agent.ToolbatchAgent"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@cache
def _recording_model_class() -> type[Any]:
    from minisweagent.models.test_models import DeterministicToolcallModel

    class RecordingModel(DeterministicToolcallModel):
        """mini-swe-agent's deterministic tool-call model, keeping every request it received."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.requests: list[list[dict[str, Any]]] = []

        def query(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
            self.requests.append([dict(message) for message in messages])
            return super().query(messages, **kwargs)

    return RecordingModel


def _response(*commands: str, prefix: str) -> dict[str, Any]:
    from minisweagent.models.test_models import make_toolcall_output

    ids = [f"{prefix}{index}" for index in range(len(commands))]
    tool_calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }
        for call_id, command in zip(ids, commands, strict=True)
    ]
    actions = [
        {"command": command, "tool_call_id": call_id}
        for call_id, command in zip(ids, commands, strict=True)
    ]
    return make_toolcall_output(None, tool_calls, actions)


def _mini(tmp_path: Path, agent_class: str, *responses: dict[str, Any]) -> Any:
    """mini.yaml's own agent and templates, with the environment given by its import path."""
    from minisweagent.agents import get_agent
    from minisweagent.config import get_config_path
    from minisweagent.environments import get_environment

    config = yaml.safe_load(get_config_path("mini").read_text())
    model = _recording_model_class()(
        outputs=list(responses),
        observation_template=config["model"]["observation_template"],
    )
    env = get_environment(
        {
            **config["environment"],
            "environment_class": ENVIRONMENT,
            "batch_budget": BUDGET,
            "artifacts_dir": str(tmp_path / "art"),
            "cwd": str(tmp_path),
            "record": str(tmp_path / "turns.jsonl"),
        }
    )
    agent_config = {**config["agent"], "agent_class": agent_class, "mode": None}
    agent_config.pop("mode")
    return get_agent(model, env, agent_config), model, env


def test_a_batch_of_three_commands_reaches_the_model_bounded_in_order(tmp_path: Path) -> None:
    """ToolbatchAgent runs a response's actions as one turn: bounded, paired, in order."""
    agent, model, env = _mini(
        tmp_path,
        AGENT,
        _response(BIG_COMMAND, SMALL_COMMAND, BIG_COMMAND, BIG_COMMAND, prefix="c"),
        _response(SUBMIT, prefix="s"),
    )
    with env:
        result = agent.run("count")
    assert result["exit_status"] == "Submitted"
    assert len(model.requests) == 2
    tool_messages = [m for m in model.requests[1] if m.get("role") == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c0", "c1", "c2", "c3"]
    outputs = [m["extra"]["raw_output"] for m in tool_messages]
    assert len(check_bounded(outputs)) == 3
    assert outputs[1] == "small\n"
    assert [m["extra"]["returncode"] for m in tool_messages] == [0, 0, 0, 0]
    for message in tool_messages:  # mini.yaml's template, its whole-output branch
        observation = json.loads(message["content"])
        assert observation["returncode"] == 0
        assert "warning" not in observation


def test_the_default_agent_runs_each_action_through_toolbatch(tmp_path: Path) -> None:
    """With mini-swe-agent's own DefaultAgent each action is a turn of one, bounded alone."""
    agent, model, env = _mini(
        tmp_path,
        "default",
        _response(BIG_COMMAND, "exit 3", prefix="c"),
        _response(SUBMIT, prefix="s"),
    )
    with env:
        assert agent.run("count")["exit_status"] == "Submitted"
    big, failed = [m for m in model.requests[1] if m.get("role") == "tool"]
    check_bounded([big["extra"]["raw_output"]])
    assert (failed["extra"]["returncode"], failed["extra"]["raw_output"]) == (3, "")


def test_a_timeout_stops_the_command_and_says_so(tmp_path: Path) -> None:
    """A command over its timeout is stopped; mini-swe-agent gets returncode -1 and why."""
    from toolbatch.integrations.mini_swe_agent import ToolbatchEnvironment

    env = ToolbatchEnvironment(artifacts_dir=str(tmp_path), timeout=1)
    with env:
        output = env.execute({"command": "echo started; sleep 30"})
    assert output["returncode"] == -1
    assert "timed out" in output["exception_info"]
    assert output["output"].startswith("started")
    assert output["extra"]["exception_type"] == "timeout"


def test_an_interrupt_kills_the_running_commands(tmp_path: Path) -> None:
    """Ctrl-C during a batch stops its commands before KeyboardInterrupt propagates."""
    pid_files = [tmp_path / f"pid{index}" for index in range(3)]
    agent, _, env = _mini(
        tmp_path, AGENT, _response(*(pid_command(path) for path in pid_files), prefix="c")
    )

    pids: list[int] = []
    started: list[bool] = []
    sent: list[int] = []
    interrupted = threading.Event()
    # Ctrl-C as a fresh process has it, whatever earlier tests in this worker left: Python's
    # handler, SIGINT not blocked, no wake-up descriptor (what was found is in the message
    # below; two fresh-clone runs out of four never saw the KeyboardInterrupt).
    found_state = (
        signal.getsignal(signal.SIGINT),
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}),
        signal.set_wakeup_fd(-1),
    )
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"SIGINT state found: {found_state}", file=sys.stderr)  # shown if the test fails

    def interrupt_once_running() -> None:
        deadline = time.monotonic() + 20
        while None in (found := [running_pid(path) for path in pid_files]):
            if time.monotonic() > deadline:
                break  # Ctrl-C all the same: the assertions below say what was missing
            time.sleep(0.01)
        started.extend(path.exists() for path in pid_files)
        pids.extend(pid for pid in found if pid is not None)
        for attempt in range(5):
            sent.append(attempt)
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)  # Ctrl-C
            # A Ctrl-C that took stops the commands at once; one that did not (two
            # fresh-clone runs of the suite) is pressed again, as a user would.
            settle = time.monotonic() + 5
            while time.monotonic() < settle:
                if interrupted.is_set() or not any(alive(pid) for pid in pids):
                    return
                time.sleep(0.02)

    interrupter = threading.Thread(target=interrupt_once_running)
    interrupter.start()
    with env, pytest.raises(KeyboardInterrupt):
        agent.run("sleep")
    interrupted.set()
    interrupter.join()
    assert len(pids) == 3, (
        f"within 20 s: pid files {started}, sleeps found {pids}; SIGINT state {found_state}; "
        f"Ctrl-C pressed {len(sent)} time(s)"
    )
    assert [pid for pid in pids if alive(pid)] == []


def test_the_returncode_is_the_commands_whatever_it_prints(tmp_path: Path) -> None:
    """returncode is how the command ended (a signal as -N), never an exit line it printed
    itself, which stays in its output; toolbatch's own exit line is dropped."""
    from toolbatch.integrations.mini_swe_agent import ToolbatchEnvironment

    commands = {
        "printf 'done\\n[exit code: 0]\\n'; exit 3": (3, "done\n[exit code: 0]\n"),
        "echo '[exit code: 7]'": (0, "[exit code: 7]\n"),
        "echo '[exit code: 0]'; kill -KILL $$": (-9, "[exit code: 0]\n"),
    }
    with ToolbatchEnvironment(artifacts_dir=str(tmp_path)) as env:
        for command, (returncode, output) in commands.items():
            result = env.execute({"command": command})
            assert (result["returncode"], result["output"]) == (returncode, output), command
