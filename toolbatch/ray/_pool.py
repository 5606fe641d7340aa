"""Many sessions across a Ray cluster: ``SessionPool`` and ``open_session``.

Each host is a Ray actor (one worker process) placed by Ray's own scheduler with the
resources its sessions declare (``{"CPU": 0}`` by default: a session host waits on tools,
it does not compute) and, by default, spread across the nodes. A host holds
``sessions_per_host`` sessions (1 by default: a session's crash, kill and restart are its
own); see ``toolbatch/ray/README.md`` for when to host several.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import anyio
import ray
import structlog
from ray.exceptions import RayActorError

from toolbatch.errors import ConfigError, SessionHostError
from toolbatch.logs import LogLevel
from toolbatch.ray._host import RegistryFactory, SessionHost, SessionSpec, with_fields
from toolbatch.ray._session import (
    CLOSE_TIMEOUT_S,
    DEFAULT_OPEN_TIMEOUT_S,
    SessionHandle,
    check_restarts,
)
from toolbatch.scheduler import Registry, SchedulerConfig, default_registry

__all__ = [
    "DEFAULT_SESSION_RESOURCES",
    "ConfigSource",
    "SessionPool",
    "open_session",
    "session_registry",
]

log = structlog.get_logger("toolbatch.ray")

DEFAULT_SESSION_RESOURCES: Final[Mapping[str, float]] = {"CPU": 0}
"""What one session reserves: nothing (Ray's default for an actor is 1 CPU to schedule)."""
MAX_HOST_CONCURRENCY: Final = 1000
"""Concurrent calls one host accepts (Ray's default for async actors)."""

ConfigSource = SchedulerConfig | Callable[[int], SchedulerConfig] | None
"""One configuration for every session, or a function of the session's index."""

_HostActor: Any = ray.remote(SessionHost)


def session_registry(workspace: Path) -> Registry:
    """The default tools of a session, its shell commands run in its workspace."""
    return default_registry(cwd=workspace)


def _actor_options(
    resources: Mapping[str, float], count: int, *, max_restarts: int, strategy: Any
) -> dict[str, Any]:
    options: dict[str, Any] = {
        "num_cpus": 0,
        "max_restarts": max_restarts,
        "max_task_retries": 0,  # at most once: a tool call may have side effects
        "max_concurrency": MAX_HOST_CONCURRENCY,
        "scheduling_strategy": strategy,
    }
    custom: dict[str, float] = {}
    for name, amount in resources.items():
        total = amount * count
        if name == "CPU":
            options["num_cpus"] = total
        elif name == "GPU":
            options["num_gpus"] = total
        elif name == "memory":
            options["memory"] = int(total)
        else:
            custom[name] = total
    if custom:
        options["resources"] = custom
    return options


def _check_resources(resources: object) -> dict[str, float]:
    if resources is None:
        return dict(DEFAULT_SESSION_RESOURCES)
    if not isinstance(resources, Mapping):
        raise ConfigError(
            f"resources must be a mapping of Ray resource names to amounts per session, "
            f"e.g. {{'CPU': 0.1, 'memory': 200_000_000}}, got {resources!r}"
        )
    checked: dict[str, float] = {}
    for name, amount in resources.items():
        if (
            not isinstance(name, str)
            or isinstance(amount, bool)
            or not isinstance(amount, int | float)
            or not math.isfinite(amount)
            or amount < 0
        ):
            raise ConfigError(
                f"resources[{name!r}] must be a number >= 0 (per session), got {amount!r}"
            )
        checked[name] = float(amount) if name != "memory" else amount
    checked.setdefault("CPU", 0)
    return checked


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
    return value


class SessionPool:
    """``size`` remote sessions, opened across the cluster and closed together.

    ``async with SessionPool(200, session_registry, config) as pool:`` opens every session
    (Ray places the hosts); ``pool[i]`` is a ``SessionHandle``; leaving the block closes
    every session (MCP servers and processes stopped) and ends every host.

    Args:
        size: how many sessions.
        registry_factory: called on each session's host with its workspace directory,
            or with nothing when it takes no parameter (``toolbatch.default_registry``);
            returns the session's tools (e.g. ``session_registry``). It is pickled (a
            module-level function or a closure over plain values). Its signature is
            checked here: one that can take neither is refused at once.
        config: the sessions' configuration, or a function of the session's index (run
            here) returning each one's. Paths in it are the host node's. Its recorder stays
            here; a ``store`` cannot move (use ``artifacts_dir``). Each session gets its
            own ``session_id``: the config's, else a pool id, plus ``-<index>``.
        resources: Ray resources per session (``CPU``, ``GPU``, ``memory`` in bytes, and
            custom ones); default ``{"CPU": 0}``.
        sessions_per_host: sessions per host actor (process); they share its fate.
        max_restarts: how often Ray restarts a host that died (0: never; -1: always). A
            restarted host opens its sessions anew on their next batch; the batch that
            was running is answered ``session_lost``, never run again.
        scheduling_strategy: Ray's ``scheduling_strategy`` for the hosts (``"SPREAD"``:
            across nodes; ``"DEFAULT"``; or a placement group strategy).
        workspace_dir: where each session's workspace is made on its node
            (``<dir>/<session_id>``, kept); ``None``: a temp directory removed at close.
        open_timeout_s: how long opening may take (hosts waiting for resources, MCP
            servers starting).
        log_level: what each host logs (to its stderr, kept in Ray's worker log files);
            ``None`` leaves the host's logging as it is.
    """

    def __init__(
        self,
        size: int,
        registry_factory: RegistryFactory = session_registry,
        config: ConfigSource = None,
        *,
        resources: Mapping[str, float] | None = None,
        sessions_per_host: int = 1,
        max_restarts: int = 0,
        scheduling_strategy: Any = "SPREAD",
        workspace_dir: str | Path | None = None,
        open_timeout_s: float = DEFAULT_OPEN_TIMEOUT_S,
        log_level: LogLevel | None = "warning",
    ) -> None:
        self.size = _check_positive_int("size", size)
        self.sessions_per_host = _check_positive_int("sessions_per_host", sessions_per_host)
        self.registry_factory = _workspace_factory(registry_factory)
        self._config = config
        self.resources = _check_resources(resources)
        self.max_restarts = check_restarts(max_restarts)
        self.scheduling_strategy = scheduling_strategy
        self.workspace_dir = None if workspace_dir is None else str(workspace_dir)
        if (
            isinstance(open_timeout_s, bool)
            or not isinstance(open_timeout_s, int | float)
            or not open_timeout_s > 0
        ):
            raise ConfigError(f"open_timeout_s must be a positive number, got {open_timeout_s!r}")
        self.open_timeout_s = float(open_timeout_s)
        if log_level not in (None, "debug", "info", "warning", "error"):
            raise ConfigError(
                f"log_level must be debug, info, warning, error or None, got {log_level!r}"
            )
        self.log_level = log_level
        self._pool_id = f"ray-{uuid.uuid4().hex[:8]}"
        self._configs = [self._session_config(index) for index in range(self.size)]
        if self.size > 1 and not callable(config) and self._configs[0].recorder is not None:
            raise ConfigError(
                "every session of the pool would record into the same recorder; pass config "
                "as a function of the session index giving each its own recorder, or give "
                "each AgentLoop its recorder (AgentLoop(..., recorder=...))"
            )
        self.hosts: list[Any] = []
        self.sessions: list[SessionHandle] = []
        self._open = False

    def _session_config(self, index: int) -> SchedulerConfig:
        source = self._config
        config = source(index) if callable(source) else source
        if config is None:
            config = SchedulerConfig()
        if not isinstance(config, SchedulerConfig):
            raise ConfigError(
                f"config must be a toolbatch.SchedulerConfig or a function of the session "
                f"index returning one, got {config!r}"
            )
        if config.store is not None:
            raise ConfigError(
                "a remote session cannot use a store made here (config.store); pass "
                "artifacts_dir=... (a path on the host's node) or leave both unset"
            )
        return config

    def _session_id(self, index: int, config: SchedulerConfig) -> str:
        if config.session_id and (callable(self._config) or self.size == 1):
            return config.session_id  # chosen for this one session
        return f"{config.session_id or self._pool_id}-{index:05d}"

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._open:
            raise RuntimeError("this SessionPool is already open")
        self._open = True
        try:
            self._start_hosts()
            failures: list[SessionHostError] = []
            with anyio.fail_after(self.open_timeout_s + CLOSE_TIMEOUT_S):
                async with anyio.create_task_group() as tg:
                    for handle in self.sessions:
                        tg.start_soon(self._open_one, handle, failures, tg.cancel_scope)
            if failures:
                # The first failure, as itself (not a group): the others are alike.
                raise failures[0]
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.aclose()
            raise
        log.info(
            "ray.pool_opened", sessions=len(self.sessions), hosts=len(self.hosts), id=self._pool_id
        )
        return self

    async def _open_one(
        self,
        handle: SessionHandle,
        failures: list[SessionHostError],
        scope: anyio.CancelScope,
    ) -> None:
        try:
            await handle._open(timeout_s=self.open_timeout_s)
        except SessionHostError as exc:
            failures.append(exc)
            scope.cancel()  # one session that cannot open fails the pool

    def _start_hosts(self) -> None:
        ids = [self._session_id(i, config) for i, config in enumerate(self._configs)]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"every session needs its own session_id, got {ids!r}")
        for first in range(0, self.size, self.sessions_per_host):
            indexes = range(first, min(first + self.sessions_per_host, self.size))
            options = _actor_options(
                self.resources,
                len(indexes),
                max_restarts=self.max_restarts,
                strategy=self.scheduling_strategy,
            )
            host = _HostActor.options(**options).remote(self.log_level)
            self.hosts.append(host)
            for index in indexes:
                config = self._configs[index]
                spec = SessionSpec(
                    session_id=ids[index],
                    registry_factory=self.registry_factory,
                    config=with_fields(config, recorder=None, session_id=ids[index]),
                    workspace_dir=self.workspace_dir,
                )
                self.sessions.append(
                    SessionHandle(host, spec, config, restartable=self.max_restarts != 0)
                )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every session, then end every host (waits until Ray reports them dead)."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for handle in self.sessions:
                    tg.start_soon(handle.aclose)
            hosts, self.hosts = self.hosts, []
            for host in hosts:
                ray.kill(host, no_restart=True)
            with anyio.move_on_after(CLOSE_TIMEOUT_S):
                for host in hosts:
                    await _gone(host)
        if hosts:
            log.info("ray.pool_closed", hosts=len(hosts), id=self._pool_id)

    # -- the sessions -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.sessions)

    def __getitem__(self, index: int) -> SessionHandle:
        return self.sessions[index]

    def __iter__(self) -> Iterator[SessionHandle]:
        return iter(self.sessions)


async def _gone(host: Any) -> None:
    """Return once Ray reports the (killed) host dead."""
    with contextlib.suppress(RayActorError):
        while True:
            await host.pid.remote()
            await anyio.sleep(0.05)  # the kill is still on its way; ask again


def _without_workspace(factory: Callable[[], Registry], workspace: Path) -> Registry:
    del workspace
    return factory()


def _workspace_factory(factory: object) -> RegistryFactory:
    """``factory`` as a function of the workspace directory.

    One that takes the workspace (one positional argument) is returned as it is; one that
    takes no argument is called without it. Anything else is refused now, rather than
    with a ``TypeError`` on a host when the first session opens.

    Raises:
        ConfigError: ``factory`` is not callable, or can be called neither way.
    """
    example = "toolbatch.ray.session_registry, or toolbatch.default_registry"
    if not callable(factory):
        raise ConfigError(
            f"registry_factory must be a function returning a toolbatch.Registry, called "
            f"with the session's workspace path or with nothing ({example}), got {factory!r}"
        )
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a callable without a signature: trust it
        return factory
    for arguments in ((Path(),), ()):
        try:
            signature.bind(*arguments)
        except TypeError:
            continue
        return factory if arguments else functools.partial(_without_workspace, factory)
    name = getattr(factory, "__qualname__", None) or repr(factory)
    parameters = ", ".join(signature.parameters)
    raise ConfigError(
        f"registry_factory {name}({parameters}) can be called neither with the session's "
        f"workspace path (one positional argument) nor with nothing; give it one parameter "
        f"for the workspace, or defaults for all of them ({example})"
    )


@contextlib.asynccontextmanager
async def open_session(
    registry_factory: RegistryFactory = session_registry,
    config: SchedulerConfig | None = None,
    *,
    resources: Mapping[str, float] | None = None,
    max_restarts: int = 0,
    scheduling_strategy: Any = "DEFAULT",
    workspace_dir: str | Path | None = None,
    open_timeout_s: float = DEFAULT_OPEN_TIMEOUT_S,
    log_level: LogLevel | None = "warning",
) -> AsyncIterator[SessionHandle]:
    """One remote session on a host of its own (a ``SessionPool`` of one)."""
    pool = SessionPool(
        1,
        registry_factory,
        config,
        resources=resources,
        max_restarts=max_restarts,
        scheduling_strategy=scheduling_strategy,
        workspace_dir=workspace_dir,
        open_timeout_s=open_timeout_s,
        log_level=log_level,
    )
    async with pool:
        yield pool[0]
