"""A SessionPool takes a registry factory of the workspace or of nothing, and refuses any
other at once, naming the factory and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolbatch
from toolbatch import Registry, SchedulerConfig, ToolCall
from toolbatch.errors import ConfigError
from toolbatch.ray import SessionPool, open_session


async def test_a_factory_without_parameters_is_called_without_the_workspace(
    tmp_path: Path,
) -> None:
    """SessionPool(1, toolbatch.default_registry, config): the session opens and runs."""
    config = SchedulerConfig(artifacts_dir=tmp_path)
    async with open_session(toolbatch.default_registry, config) as session:
        turn = await session.run_batch(
            [ToolCall(id="hi", name="run_shell_command", args={"command": "echo hi"})]
        )
    output = turn.responses[0].parts[0].function_response.response  # type: ignore[union-attr]
    assert output == {"output": "hi\n[exit code: 0]"}


def two_parameters(workspace: Path, other: str) -> Registry:
    del workspace, other
    return toolbatch.default_registry()


@pytest.mark.parametrize(
    ("factory", "said"),
    [
        pytest.param(
            two_parameters, "two_parameters(workspace, other) can be called neither", id="two"
        ),
        pytest.param("default_registry", "got 'default_registry'", id="not-callable"),
    ],
)
def test_an_unusable_factory_is_refused_at_construction(factory: object, said: str) -> None:
    """Refused when the pool is made, not with a TypeError on a host later."""
    with pytest.raises(ConfigError, match="registry_factory") as caught:
        SessionPool(1, factory)  # type: ignore[arg-type]
    assert said in str(caught.value)
    assert "toolbatch.default_registry" in str(caught.value)
