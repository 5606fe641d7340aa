"""The stdio JSON-RPC service behind ``toolbatch serve``: toolbatch for agents in any language."""

from toolbatch.service._service import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_MESSAGE_BYTES,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SERVICE_PROTOCOL_VERSION,
    BatchBackend,
    BatchCallParams,
    BatchRunParams,
    batch_result,
    loads_json,
    parse_batch,
    serve,
    serve_stdio,
)

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_MESSAGE_BYTES",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SERVICE_PROTOCOL_VERSION",
    "BatchBackend",
    "BatchCallParams",
    "BatchRunParams",
    "batch_result",
    "loads_json",
    "parse_batch",
    "serve",
    "serve_stdio",
]
