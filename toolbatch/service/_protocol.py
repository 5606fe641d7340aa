"""The wire protocol of ``toolbatch serve``: its methods, errors and limits, the ``batch/run``
params and their validation, and strict JSON parsing.

JSON-RPC 2.0, one message per line on stdin and stdout (like MCP and ACP stdio). Lines are
framed on ``"\\n"`` only: U+2028 and U+2029 stay raw inside strings, so a reader must split on
``"\\n"``, never with ``str.splitlines()``. Output lines are ``JSON.stringify``-compatible
UTF-8 (see ``dumps_json_line``); each message is one whole line, written by one writer.

Methods (params and results are JSON objects; field names are snake_case)::

    initialize    params: anything (optional)
                  result: {"protocol_version": 1, "server_info": {"name", "version"},
                           "capabilities": {"batch_progress": true, "batch_cancel": true,
                                            "concurrent_batches": true},
                           "default_budget_chars": int | null}
    tools/list    result: {"tools": [{"name", "description", "input_schema"}]}
    batch/run     params: {"calls": [{"id": str, "name": str, "args": {...}}],
                           "budget": int | null (optional)}
                  result: {"responses": [{"call_id", "name", "status", "parts", "display"}],
                           "parts": [<wire parts>],
                           "stop_reason": str (only when a hook stopped the agent)}
    batch/cancel  params: {"request_id": <the id of a batch/run request>}
                  result: {"cancelled": bool}  (false: no such batch is running any more)
    shutdown      result: {}; in-flight batches are cancelled and answered first, then the
                  service answers and exits.

``budget`` is in code points of model-facing text for that batch: a positive int, ``0`` to
disable the budget, or ``null`` / absent for the service's default. ``parts`` are exactly
what the model should receive (finalized against the budget, complete output persisted at
most once); ``display`` is the rich user-facing value, not budgeted but bounded on the wire
like every transport's display: a string is projected to 65,536 bytes of JSON (head and
tail around a marker), and any other value whose JSON is larger becomes such a projected
string of its JSON. Internal state such as ``persisted_output_files`` never reaches the
wire.

While a batch runs the service sends ``batch/progress`` notifications, every one before the
batch's answer::

    {"request_id": <batch/run id>, "call_id": str, "index": int, "status": str,
     "message": str (only with "running", when the tool reports progress)}

``status`` is ``queued`` (every call, when the batch starts), ``running`` (started, or a
progress report; a call answered without running, such as an unknown tool, is started and
finished at once), then the call's final status: ``success``, ``error``, ``cancelled``,
``skipped`` or ``duplicate``. ``index`` is the call's position in ``calls`` (call ids need
not be unique).

Several ``batch/run`` requests may be in flight at once; each gets its own answer. A
cancelled batch still answers, its unfinished calls with ``cancelled`` responses and no
process left behind. ``batch/cancel`` and ``shutdown`` may also be sent as notifications
(no ``id``). A notification (an object without ``id``) is never answered, not even
with an error: a bad one is logged and dropped.

Errors: ``-32700`` a line that is not JSON, ``-32600`` a message that is not a request
(including JSON-RPC batch arrays, which are not supported), a ``batch/run`` id already in
flight, a line longer than ``MAX_MESSAGE_BYTES`` (64 MiB; answered with id ``null``) or
nested deeper than ``MAX_JSON_DEPTH`` (128 levels, ``toolbatch._core._json_limits``; answered under
the request's id when it can be read without parsing, else ``null``), ``-32601`` an
unknown method, ``-32602`` bad params, ``-32603`` an internal error.
Each message names the problem and the fix. The service never dies of bad input.

End of input: when stdin closes, batches in flight run to the end and answer, then the
service exits. SIGTERM and SIGINT cancel them (they still answer), then it exits.

Backpressure and memory (a client that stops reading): ``toolbatch.service._output``.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from toolbatch._core import MAX_JSON_DEPTH, ToolCall, check_json_depth, trusted_call
from toolbatch.errors import ConfigError
from toolbatch.finalize import budget_from_wire

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_MESSAGE_BYTES",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SERVICE_PROTOCOL_VERSION",
    "BatchCallParams",
    "BatchRunParams",
    "loads_json",
    "parse_batch",
    "plain_batch",
]

SERVICE_PROTOCOL_VERSION: Final = 1
"""The version of the method set above, reported by ``initialize``."""

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
MAX_MESSAGE_BYTES: Final = 64 * 2**20
"""The longest request line accepted; a longer one is discarded and answered with -32600."""

_METHODS: Final = ("initialize", "tools/list", "batch/run", "batch/cancel", "shutdown")

IdKey: TypeAlias = tuple[str, object]
"""A request id made hashable without conflating 1 and "1" (1 and 1.0 are the same id)."""


# -- the batch/run params, shared with ``toolbatch run`` ------------------------------------


class BatchCallParams(BaseModel):
    """One call of a ``batch/run``: ``{"id": str, "name": str, "args": {...}}``."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str = Field(strict=True)
    name: str = Field(strict=True)
    args: dict[str, JsonValue] = Field(default_factory=dict)


class BatchRunParams(BaseModel):
    """The ``batch/run`` params: the calls and an optional budget.

    ``budget``: code points of model-facing text for the batch; ``0`` disables the budget,
    ``None`` (or leaving it out) means the runtime's default.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    calls: list[BatchCallParams]
    budget: int | None = Field(default=None, strict=True, ge=0)

    def tool_calls(self) -> list[ToolCall]:
        """The calls as ``ToolCall``s, each with its position as ordinal."""
        return [
            ToolCall(id=call.id, name=call.name, args=call.args, ordinal=index)
            for index, call in enumerate(self.calls)
        ]

    def resolve_budget(self, default: int | None) -> int | None:
        """The budget to finalize with: this batch's, else ``default``; ``None`` disables."""
        return budget_from_wire(self.budget, default)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (JSON has no NaN or Infinity)")


def loads_json(data: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse one JSON document strictly (UTF-8; no NaN or Infinity; at most ``max_depth``
    levels of arrays and objects, checked before parsing).

    Raises:
        JsonTooDeep: the document nests deeper than ``max_depth`` (a ``ValueError``).
        ValueError: the text is not JSON; the message says where.
    """
    check_json_depth(data, max_depth)
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"invalid UTF-8 at byte {exc.start} ({data[exc.start : exc.start + 1]!r})"
            ) from None
    try:
        return json.loads(data, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False)[:8]:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
        where = where.lstrip(".") or "(document)"
        given = error.get("input")
        shown = "" if error["type"] == "missing" else f" (got {_short(given)})"
        problems.append(f"{where}: {error['msg']}{shown}")
    more = len(exc.errors()) - len(problems)
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")


def _short(value: object, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_batch(document: object) -> BatchRunParams:
    """A batch from its JSON value: the ``batch/run`` params object or a bare list of calls.

    Raises:
        ConfigError: the value has the wrong shape; the message names each problem.
    """
    if isinstance(document, list):
        document = {"calls": document}
    elif not isinstance(document, dict):
        raise ConfigError(
            f'a batch is an object {{"calls": [...], "budget": ...}} or a list of calls '
            f'{{"id", "name", "args"}}, got {_short(document)}'
        )
    try:
        return BatchRunParams.model_validate(document)
    except ValidationError as exc:
        raise ConfigError(
            f"invalid batch: {_describe(exc)}; each call is "
            f'{{"id": str, "name": str, "args": {{...}}}} and budget is an int >= 0 or null'
        ) from None


_PLAIN_BATCH_KEYS: Final = frozenset({"calls", "budget"})
_PLAIN_CALL_KEYS: Final = frozenset({"id", "name", "args"})


def plain_batch(params: dict[str, Any]) -> tuple[list[ToolCall], int | None] | None:
    """The calls and budget of ``params`` when they plainly have the right shape, built
    without a model per call; ``None`` sends the params through ``parse_batch``.

    ``params`` comes from ``loads_json``, so every value is JSON already; what is left to
    check is what ``BatchRunParams`` checks: the keys, string ids and names, object args
    and a budget that is an int >= 0 or null. Anything else takes the validating path,
    which names each problem. A 100,000-call request then costs its calls alone, not its
    calls twice over (the params models and the ``ToolCall``s).
    """
    calls = params.get("calls")
    budget = params.get("budget")
    if not params.keys() <= _PLAIN_BATCH_KEYS or type(calls) is not list:
        return None
    if budget is not None and (type(budget) is not int or budget < 0):
        return None
    built: list[ToolCall] = []
    names: dict[str, str] = {}  # one string per tool name, not one per call
    for index, call in enumerate(calls):
        if type(call) is not dict or not call.keys() <= _PLAIN_CALL_KEYS:
            return None
        call_id, name, args = call.get("id"), call.get("name"), call.get("args", {})
        if type(call_id) is not str or type(name) is not str or type(args) is not dict:
            return None
        built.append(trusted_call(call_id, names.setdefault(name, name), args, index))
    return built, budget


# -- JSON-RPC messages -------------------------------------------------------------------


class _JsonRpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _valid_id(value: object) -> bool:
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _id_key(value: object) -> IdKey:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    kind = "number" if isinstance(value, int | float) else type(value).__name__
    return (kind, value)


def _validate(message: object) -> tuple[str, object, bool]:
    """The method, the params and whether it is a request; raises ``_JsonRpcError``."""
    if isinstance(message, list):
        raise _JsonRpcError(
            INVALID_REQUEST,
            "JSON-RPC batches (arrays) are not supported; send one request object per line",
        )
    if not isinstance(message, dict):
        raise _JsonRpcError(
            INVALID_REQUEST, f"a request must be a JSON object, got {_short(message)}"
        )
    is_request = "id" in message
    if is_request and not _valid_id(message["id"]):
        raise _JsonRpcError(
            INVALID_REQUEST,
            f"id must be a string, a number or null, got {_short(message['id'])}",
        )
    if message.get("jsonrpc") != "2.0":
        raise _JsonRpcError(
            INVALID_REQUEST, f'"jsonrpc" must be "2.0", got {_short(message.get("jsonrpc"))}'
        )
    method = message.get("method")
    if not isinstance(method, str):
        raise _JsonRpcError(
            INVALID_REQUEST,
            f'"method" must be a string, got {_short(method)}; methods: {", ".join(_METHODS)}',
        )
    params = message.get("params")
    if params is not None and not isinstance(params, dict | list):
        raise _JsonRpcError(INVALID_REQUEST, f'"params" must be an object, got {_short(params)}')
    return method, params, is_request
