"""mini-swe-agent with its own mini.yaml, running commands through toolbatch, no network.

Run it: ``python examples/mini_swe_agent_env.py``

mini-swe-agent's ``DeterministicToolcallModel`` answers with three commands in one response,
then submits. The environment (``ToolbatchEnvironment``, named by its import path as a YAML
config would) and ``ToolbatchAgent`` run the three as one toolbatch batch, sandboxed and
bounded together to 6,000 characters; mini.yaml's own template renders what the model sees.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import yaml
from minisweagent.agents import get_agent
from minisweagent.config import get_config_path
from minisweagent.environments import get_environment
from minisweagent.models.test_models import DeterministicToolcallModel, make_toolcall_output

import toolbatch

COMMANDS = ["seq 1 100000", "ls /", "seq 5 200000"]


def response(*commands: str, prefix: str) -> dict[str, Any]:
    calls = [
        {
            "id": f"{prefix}{index}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }
        for index, command in enumerate(commands)
    ]
    actions = [{"command": c, "tool_call_id": f"{prefix}{i}"} for i, c in enumerate(commands)]
    return make_toolcall_output(None, calls, actions)


def main() -> None:
    toolbatch.configure_logging("warning")
    config = yaml.safe_load(get_config_path("mini").read_text())
    model = DeterministicToolcallModel(
        outputs=[
            response(*COMMANDS, prefix="c"),
            response("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", prefix="s"),
        ],
        observation_template=config["model"]["observation_template"],
    )
    with tempfile.TemporaryDirectory() as artifacts:
        env = get_environment(
            {
                **config["environment"],
                "environment_class": "toolbatch.integrations.mini_swe_agent.ToolbatchEnvironment",
                "batch_budget": 6_000,
                "artifacts_dir": artifacts,
            }
        )
        agent_config = {k: v for k, v in config["agent"].items() if k != "mode"}
        agent_config["agent_class"] = "toolbatch.integrations.mini_swe_agent.ToolbatchAgent"
        agent = get_agent(model, env, agent_config)
        with env:
            result = agent.run("Look around.")
        observations = [m for m in agent.messages if m.get("role") == "tool"]
        for message in observations:
            output = message["extra"]["raw_output"]
            first = output.splitlines()[0] if output else ""
            code = message["extra"]["returncode"]
            print(f"== bash [{message['tool_call_id']}] returncode {code}: {len(output):,} chars")
            print("   " + first)
        total = sum(len(m["extra"]["raw_output"]) for m in observations[:3])
        print(f"{total:,} characters of command output sent, within budget 6,000")
        print(f"exit status: {result['exit_status']}")


if __name__ == "__main__":
    main()
