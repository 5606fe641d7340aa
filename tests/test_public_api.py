"""The public surface: every name in __all__ exists, and the contract names are there."""

from __future__ import annotations

import importlib

import pytest

import toolbatch
from tests.integrations._support import INTEGRATIONS
from toolbatch.errors import ConfigError

# The framework integrations import their frameworks (seconds of CPU): these tests run in
# the worker that imports them anyway for tests/integrations, not in every worker.
pytestmark = INTEGRATIONS

PACKAGES = [
    "toolbatch",
    "toolbatch.errors",
    "toolbatch.logs",
    "toolbatch.recorder",
    "toolbatch.artifacts",
    "toolbatch.sandbox",
    "toolbatch.scheduler",
    "toolbatch.producers",
    "toolbatch.producers.mcp",
    "toolbatch.finalize",
    "toolbatch.hooks",
    "toolbatch.permissions",
    "toolbatch.transports",
    "toolbatch.service",
    "toolbatch.providers",
    "toolbatch.providers.openai_chat",
    "toolbatch.providers.openai_responses",
    "toolbatch.providers.anthropic",
    "toolbatch.providers.gemini",
    "toolbatch.agent",
    "toolbatch.acp",
    "toolbatch.testing",
    "toolbatch.telemetry",
    "toolbatch.ray",
    "toolbatch.cli",
    "toolbatch.integrations",
    "toolbatch.integrations.langgraph",
    "toolbatch.integrations.pydantic_ai",
    "toolbatch.integrations.openai_agents",
    "toolbatch.integrations.mini_swe_agent",
]

CONTRACT = {
    "toolbatch": [
        "ArtifactStore",
        "JsonlRecorder",
        "Part",
        "Registry",
        "SchedulerConfig",
        "ToolCall",
        "ToolCallResponse",
        "ToolResult",
        "ToolScheduler",
        "ToolbatchError",
        "Turn",
        "default_registry",
        "load_session",
        "tool",
    ],
    "toolbatch.finalize": [
        "DEFAULT_LIFECYCLE_TOOLS",
        "check_budget",
        "enforce_send_budget",
        "finalize_tool_responses",
        "response_text_length",
    ],
    "toolbatch.hooks": [
        "CommandHook",
        "EventHook",
        "PostToolBatchInput",
        "PostToolBatchOutput",
        "PostToolUseFailureInput",
        "PostToolUseInput",
        "PreToolUseInput",
        "ToolHookOutput",
        "load_settings",
    ],
    "toolbatch.permissions": ["PermissionRule", "Permissions", "analyze_command"],
    "toolbatch.ray": ["SessionHandle", "SessionPool", "open_session"],
    "toolbatch.integrations.langgraph": ["ToolbatchNode"],
    "toolbatch.integrations.pydantic_ai": ["ToolbatchToolset"],
    "toolbatch.integrations.openai_agents": ["ToolbatchTools"],
    "toolbatch.integrations.mini_swe_agent": ["ToolbatchEnvironment"],
    "toolbatch.agent": [
        "AnthropicModel",
        "ModelError",
        "OpenAIChatModel",
        "OpenAIResponsesModel",
    ],
    **{
        f"toolbatch.providers.{api}": ["tool_calls", "tool_definitions", "tool_results"]
        for api in ("openai_chat", "openai_responses", "anthropic", "gemini")
    },
}


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions.
    if name.isupper() or (name.upper() == name and "_" in name):
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


@pytest.mark.parametrize("module_name", PACKAGES)
def test_all_lists_only_real_names_in_sorted_order(module_name: str) -> None:
    """Each package's __all__ is sorted (constants, classes, functions) and resolves."""
    module = importlib.import_module(module_name)
    names = list(module.__all__)
    assert names == sorted(names, key=_isort_key)
    for name in names:
        assert hasattr(module, name), f"{module_name}.{name} is in __all__ but missing"


@pytest.mark.parametrize(("module_name", "names"), list(CONTRACT.items()))
def test_contract_names_are_exported(module_name: str, names: list[str]) -> None:
    """Names other issues and users rely on are exported."""
    module = importlib.import_module(module_name)
    for name in names:
        assert name in module.__all__


def test_errors_share_one_root() -> None:
    """Every exception any package exports derives from ToolbatchError and is defined in
    toolbatch.errors (one tree, drawn in its docstring)."""
    outside = []
    for module_name in PACKAGES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            is_error = isinstance(obj, type) and issubclass(obj, BaseException)
            if is_error and (
                not issubclass(obj, toolbatch.ToolbatchError)
                or obj.__module__ != "toolbatch.errors"
            ):
                outside.append(f"{module_name}.{name} ({obj.__module__})")
    assert outside == []


def test_configure_logging_refuses_an_unknown_level() -> None:
    """A bad level is a ConfigError naming the value, not a bare ValueError."""
    with pytest.raises(ConfigError, match="'verbose'"):
        toolbatch.configure_logging("verbose")  # type: ignore[arg-type]


MAX_PUBLIC_NAMES = 150


def test_the_public_surface_is_small_enough_to_hold_in_ones_head() -> None:
    """At most 150 distinct names across every public module's __all__ (a name re-exported
    at the top level counts once); everything else is internal, re-exported by a package's
    __init__ only as ``Name as Name`` for its sibling packages."""
    names: set[str] = set()
    for module_name in PACKAGES:
        names.update(importlib.import_module(module_name).__all__)
    assert len(names) <= MAX_PUBLIC_NAMES, sorted(names)


def test_the_top_level_exports_what_embedding_needs() -> None:
    """The agent loop, the hook types, the turn object and the model error are importable
    from ``toolbatch`` itself."""
    for name in (
        "AgentLoop",
        "CommandHook",
        "EventHook",
        "ModelError",
        "PendingTurn",
        "PostToolBatchInput",
        "PostToolBatchOutput",
    ):
        assert name in toolbatch.__all__
        assert getattr(toolbatch, name) is not None
