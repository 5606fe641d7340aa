"""The ACP adapter: toolbatch as an Agent Client Protocol agent for editors such as Zed.

It is a runtime (it drives the agent loop and the scheduler), so it lives beside
``toolbatch.agent`` rather than in ``toolbatch.transports``, which never import the
scheduler; the pure display projection it applies to every update stays in
``toolbatch.transports.project_acp_update``.

The ACP SDK's schema takes most of a second to import, so everything but the model
choices is imported on first use: ``toolbatch run`` never pays for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from toolbatch.acp._choices import (
    DEFAULT_MAX_SESSIONS as DEFAULT_MAX_SESSIONS,
    MODEL_CHOICES as MODEL_CHOICES,
    ModelChoice as ModelChoice,
)

if TYPE_CHECKING:
    from toolbatch.acp._agent import AcpAgent as AcpAgent
    from toolbatch.acp._permissions import (
        ALLOW_ALWAYS as ALLOW_ALWAYS,
        ALLOW_ONCE as ALLOW_ONCE,
        REJECT_ONCE as REJECT_ONCE,
    )
    from toolbatch.acp._serve import (
        AcpOptions,
        check_model_settings as check_model_settings,
        serve_acp,
    )
    from toolbatch.acp._stdio import AcpStdioTransport as AcpStdioTransport

__all__ = [
    "AcpOptions",
    "serve_acp",
]

_LAZY = {
    "ALLOW_ALWAYS": "toolbatch.acp._permissions",
    "ALLOW_ONCE": "toolbatch.acp._permissions",
    "REJECT_ONCE": "toolbatch.acp._permissions",
    "AcpAgent": "toolbatch.acp._agent",
    "AcpOptions": "toolbatch.acp._serve",
    "check_model_settings": "toolbatch.acp._serve",
    "serve_acp": "toolbatch.acp._serve",
    "AcpStdioTransport": "toolbatch.acp._stdio",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolbatch.acp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
