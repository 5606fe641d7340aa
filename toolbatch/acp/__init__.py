"""The ACP adapter: toolbatch as an Agent Client Protocol agent for editors such as Zed.

It is a runtime (it drives the agent loop and the scheduler), so it lives beside
``toolbatch.agent`` rather than in ``toolbatch.transports``, which never import the
scheduler; the pure display projection it applies to every update stays in
``toolbatch.transports.project_acp_update``.
"""

from toolbatch.acp._agent import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    DEFAULT_MAX_SESSIONS,
    MODEL_CHOICES,
    REJECT_ONCE,
    AcpAgent,
    AcpOptions,
    ModelChoice,
    check_model_settings,
    serve_acp,
)
from toolbatch.acp._stdio import AcpStdioTransport

__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "DEFAULT_MAX_SESSIONS",
    "MODEL_CHOICES",
    "REJECT_ONCE",
    "AcpAgent",
    "AcpOptions",
    "AcpStdioTransport",
    "ModelChoice",
    "check_model_settings",
    "serve_acp",
]
