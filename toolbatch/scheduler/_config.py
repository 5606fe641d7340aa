"""``SchedulerConfig``: how a ``ToolScheduler`` runs batches, every value checked once, at
construction; and ``USE_CONFIG``, the marker of "the configured value" in per-turn options.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, get_args

from toolbatch.artifacts import ArtifactStore
from toolbatch.errors import ConfigError
from toolbatch.finalize import (
    DEFAULT_BATCH_BUDGET_CHARS,
    DEFAULT_LIFECYCLE_TOOLS,
    Budget,
    check_budget,
    check_lifecycle_tools,
)
from toolbatch.hooks import (
    DEFAULT_HOOK_TIMEOUT_S,
    CommandHook,
    EventHook,
    PostToolBatchHook,
    Settings,
    SettingsSource,
    load_settings,
)
from toolbatch.permissions import PermissionMode, Permissions
from toolbatch.recorder import Recorder
from toolbatch.sandbox import SandboxOptions

__all__ = [
    "DEFAULT_CALL_TIMEOUT_CEILING_S",
    "DEFAULT_CONCURRENCY",
    "USE_CONFIG",
    "SchedulerConfig",
    "UseConfig",
]

DEFAULT_CONCURRENCY: Final = 10
DEFAULT_CALL_TIMEOUT_CEILING_S: Final = 600.0
"""The longest any one call may run unless configured otherwise (shell's own maximum)."""


class UseConfig:
    """The type of :data:`USE_CONFIG`: "the session's configured value"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "USE_CONFIG"


USE_CONFIG: Final = UseConfig()
"""Default of per-turn options: take the value from the ``SchedulerConfig``."""


def _check_positive(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or value <= 0
    ):
        raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")


def _check_path(name: str, value: object) -> None:
    if value is not None and not isinstance(value, str | os.PathLike):
        raise ConfigError(
            f"{name} must be a path (str or os.PathLike) or None, got {value!r}; pass e.g. "
            f"{name}='./artifacts'"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig(SandboxOptions):
    """How a ``ToolScheduler`` runs batches. Every value is checked here, at construction:
    a bad one raises ``ConfigError`` naming it and the fix.

    The sandbox and environment of the shell's commands are the fields of
    ``toolbatch.sandbox.SandboxOptions``, declared there once (the command line's flags
    come from the same declaration): ``sandbox``, ``workspace_roots``, ``network``,
    ``protected_paths``, ``sandbox_private_tmp``, ``sandbox_required``, ``shell_env``,
    ``shell_env_allow`` and ``shell_env_set``.

    Attributes:
        batch_budget: the aggregate budget of model-facing text per batch, in code points:
            a positive int, or ``None`` / ``math.inf`` for no budget (stored as ``None``).
        concurrency: how many calls run at once.
        call_timeout: the ceiling on any one call, in seconds. Producers have shorter
            defaults of their own (shell 120 s unless the call asks for more, MCP 60 s,
            Python tools 120 s) and honour this ceiling.
        artifacts_dir: where complete output is kept (default: this session's folder of
            the per-user state directory, ``sessions/<session_id>``, kept while the session
            is open and for 7 days after its last use; see ``toolbatch artifacts``).
        store: an ``ArtifactStore`` to use instead of making one at ``artifacts_dir``.
        mcp_servers: an ``{"mcpServers": {...}}`` document, as a dict, a JSON file path or
            an ``McpConfig`` (read and checked now), in any common agent's shape (see
            ``toolbatch.producers.mcp``); its servers are started on enter and stopped on
            exit. Its entries win over same-named ones of ``settings``.
        mcp_startup_timeout: seconds each MCP server has to start (``initialize`` and
            ``tools/list``) when its entry sets no ``startup_timeout_sec``; ``None``: the
            ``MCP_TIMEOUT`` environment variable (milliseconds), else 30 s.
        settings: Claude Code settings (a path or a dict, or a list merged in order, later
            wins): their ``hooks``, ``permissions`` and ``mcpServers`` (see
            ``toolbatch.hooks.load_settings``), read and checked now.
        permission_mode: overrides the settings' ``permissions.defaultMode``, as Claude
            Code's ``--permission-mode``: ``default``, ``acceptEdits``, ``plan``,
            ``bypassPermissions`` or ``dontAsk`` (see ``toolbatch.permissions``).
        hooks: PostToolBatch hooks (async callables and ``CommandHook``s) and
            ``toolbatch.hooks.EventHook``s for any event, beside those of ``settings``.
        hook_timeout: seconds a Python hook may take (command hooks have their own).
        recorder: where each completed turn is recorded before it is returned.
        lifecycle_tools: tools whose successful output is policy input, kept inline
            outside the budget (default ``{"enter_plan_mode"}``).
        session_id: passed to hooks and recorded.
    """

    batch_budget: Budget | float = DEFAULT_BATCH_BUDGET_CHARS
    concurrency: int = DEFAULT_CONCURRENCY
    call_timeout: float = DEFAULT_CALL_TIMEOUT_CEILING_S
    artifacts_dir: str | os.PathLike[str] | None = None
    store: ArtifactStore | None = None
    mcp_servers: Any = None
    mcp_startup_timeout: float | None = None
    settings: SettingsSource | Sequence[SettingsSource] | Settings | None = None
    permission_mode: PermissionMode | None = None
    hooks: Sequence[PostToolBatchHook | CommandHook | EventHook] = ()
    hook_timeout: float = DEFAULT_HOOK_TIMEOUT_S
    recorder: Recorder | None = None
    lifecycle_tools: Iterable[str] = field(default_factory=lambda: DEFAULT_LIFECYCLE_TOOLS)
    session_id: str | None = None
    _budget: Budget = field(default=None, init=False, repr=False, compare=False)
    _lifecycle: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)
    _loaded: Settings = field(default_factory=Settings, init=False, repr=False, compare=False)
    _mcp_config: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Not super(): a slots dataclass is a new class, which zero-argument super() misses.
        SandboxOptions.__post_init__(self)
        # Normalised once, here: the rest of toolbatch reads .budget and .lifecycle.
        object.__setattr__(self, "_budget", check_budget(self.batch_budget))
        object.__setattr__(self, "batch_budget", self._budget)
        object.__setattr__(self, "_lifecycle", check_lifecycle_tools(self.lifecycle_tools))
        object.__setattr__(self, "lifecycle_tools", self._lifecycle)
        if (
            isinstance(self.concurrency, bool)
            or not isinstance(self.concurrency, int)
            or self.concurrency < 1
        ):
            raise ConfigError(f"concurrency must be an int >= 1, got {self.concurrency!r}")
        _check_positive("call_timeout", self.call_timeout)
        _check_positive("hook_timeout", self.hook_timeout)
        _check_path("artifacts_dir", self.artifacts_dir)
        if self.store is not None and not isinstance(self.store, ArtifactStore):
            raise ConfigError(
                f"store must be a toolbatch.ArtifactStore or None, got {self.store!r}"
            )
        if self.session_id is not None and not isinstance(self.session_id, str):
            raise ConfigError(f"session_id must be a str or None, got {self.session_id!r}")
        if isinstance(self.hooks, str | bytes) or not isinstance(self.hooks, Sequence):
            raise ConfigError(f"hooks must be a list of hooks, got {self.hooks!r}")
        for index, hook in enumerate(self.hooks):
            if not callable(hook) and not isinstance(hook, EventHook):
                raise ConfigError(
                    f"hooks[{index}] = {hook!r} is not callable; pass an async function, a "
                    f"toolbatch.hooks.CommandHook or a toolbatch.hooks.EventHook"
                )
        if self.recorder is not None and not callable(getattr(self.recorder, "record_turn", None)):
            raise ConfigError(
                f"recorder {self.recorder!r} has no record_turn method; use "
                f"toolbatch.JsonlRecorder(path)"
            )
        if self.mcp_startup_timeout is not None:
            _check_positive("mcp_startup_timeout", self.mcp_startup_timeout)
        if self.permission_mode is not None and self.permission_mode not in get_args(
            PermissionMode
        ):
            raise ConfigError(
                f"permission_mode must be one of {', '.join(get_args(PermissionMode))} or "
                f"None, got {self.permission_mode!r}"
            )
        object.__setattr__(self, "_loaded", load_settings(self.settings))
        # Read once, here: a bad document fails now, not on enter, and its warnings (keys
        # toolbatch does not use) are logged once.
        object.__setattr__(self, "_mcp_config", self._read_mcp_config())

    def _read_mcp_config(self) -> Any:
        documents = [d for d in (self._loaded.mcp_document, self.mcp_servers) if d is not None]
        if not documents:
            return None  # the MCP SDK is imported only when there are servers
        from toolbatch.producers.mcp import load_mcp_config, merge_mcp_configs

        return merge_mcp_configs(*(load_mcp_config(document) for document in documents))

    def mcp_config(self) -> Any:
        """The MCP servers to start: ``settings``' ``mcpServers``, then ``mcp_servers``
        (a ``toolbatch.producers.mcp.McpConfig``, or ``None`` when there are none)."""
        return self._mcp_config

    @property
    def loaded_settings(self) -> Settings:
        """``settings`` as read and merged."""
        return self._loaded

    @property
    def permissions(self) -> Permissions:
        """The settings' permission rules, under ``permission_mode`` when it is set."""
        permissions = self._loaded.permissions
        if self.permission_mode is None:
            return permissions
        return permissions.with_mode(self.permission_mode)

    def event_hooks(self) -> list[EventHook]:
        """Every hook bound to an event: ``settings``' first, then ``hooks``' ``EventHook``s."""
        own = [hook for hook in self.hooks if isinstance(hook, EventHook)]
        return [*self._loaded.hooks, *own]

    def post_tool_batch_hooks(self) -> list[PostToolBatchHook | CommandHook]:
        """The PostToolBatch hooks, in order: plain ``hooks``, then event-bound ones."""
        plain = [hook for hook in self.hooks if not isinstance(hook, EventHook)]
        bound = [hook.hook for hook in self.event_hooks() if hook.event == "PostToolBatch"]
        return [*plain, *bound]

    @property
    def budget(self) -> Budget:
        """``batch_budget`` as checked (``None``: no budget)."""
        return self._budget

    @property
    def lifecycle(self) -> frozenset[str]:
        """``lifecycle_tools`` as checked."""
        return self._lifecycle
