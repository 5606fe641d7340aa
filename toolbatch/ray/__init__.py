"""Sessions on a Ray cluster: a session's tools run on the node Ray placed it on, its
driver runs the model loop.

``SessionPool(size, registry_factory, config, resources=...)`` opens many sessions across
the cluster; ``open_session(...)`` opens one. Each is a ``SessionHandle`` with the surface
of a ``ToolScheduler`` (``execute``, ``complete_turn``, ``run_batch``, ``declarations``),
so ``AgentLoop`` and every runtime run unchanged against it. Install with
``pip install 'toolbatch[ray]'``; see ``toolbatch/ray/README.md``.
"""

try:
    import ray as _ray  # noqa: F401  (fail here, by name, when the extra is missing)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "toolbatch.ray needs Ray, which is not installed: pip install 'toolbatch[ray]'"
    ) from exc

from toolbatch.ray._lost import LOST_ERROR_TYPE as LOST_ERROR_TYPE
from toolbatch.ray._pool import (
    DEFAULT_SESSION_RESOURCES as DEFAULT_SESSION_RESOURCES,
    ConfigSource as ConfigSource,
    SessionPool,
    open_session,
    session_registry,
)
from toolbatch.ray._session import (
    MAX_HELD_BATCHES as MAX_HELD_BATCHES,
    RemoteTool as RemoteTool,
    SessionHandle,
    SessionState as SessionState,
)

__all__ = [
    "SessionHandle",
    "SessionPool",
    "open_session",
    "session_registry",
]
