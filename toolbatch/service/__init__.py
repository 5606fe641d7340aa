"""The stdio JSON-RPC service behind ``toolbatch serve``: toolbatch for agents in any language."""

from toolbatch.service._service import (
    INTERNAL_ERROR as INTERNAL_ERROR,
    INVALID_PARAMS as INVALID_PARAMS,
    INVALID_REQUEST as INVALID_REQUEST,
    MAX_MESSAGE_BYTES as MAX_MESSAGE_BYTES,
    METHOD_NOT_FOUND as METHOD_NOT_FOUND,
    PARSE_ERROR as PARSE_ERROR,
    SERVICE_PROTOCOL_VERSION as SERVICE_PROTOCOL_VERSION,
    BatchBackend as BatchBackend,
    BatchCallParams as BatchCallParams,
    BatchRunParams as BatchRunParams,
    batch_result as batch_result,
    loads_json as loads_json,
    parse_batch as parse_batch,
    serve,
    serve_stdio as serve_stdio,
)

__all__ = [
    "serve",
]
