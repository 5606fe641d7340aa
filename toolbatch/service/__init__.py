"""The stdio JSON-RPC service behind ``toolbatch serve``: toolbatch for agents in any language.

The protocol and its validation (``_protocol``), the batch runner's side (``_batches``),
the output and its backpressure (``_output``) and the stdio loop (``_service``).
"""

from toolbatch.service._batches import BatchBackend as BatchBackend, batch_result as batch_result
from toolbatch.service._protocol import (
    INTERNAL_ERROR as INTERNAL_ERROR,
    INVALID_PARAMS as INVALID_PARAMS,
    INVALID_REQUEST as INVALID_REQUEST,
    MAX_MESSAGE_BYTES as MAX_MESSAGE_BYTES,
    METHOD_NOT_FOUND as METHOD_NOT_FOUND,
    PARSE_ERROR as PARSE_ERROR,
    SERVICE_PROTOCOL_VERSION as SERVICE_PROTOCOL_VERSION,
    BatchCallParams as BatchCallParams,
    BatchRunParams as BatchRunParams,
    loads_json as loads_json,
    parse_batch as parse_batch,
    plain_batch as plain_batch,
)
from toolbatch.service._service import serve, serve_stdio as serve_stdio

__all__ = [
    "serve",
]
