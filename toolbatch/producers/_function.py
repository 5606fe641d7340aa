"""Custom tools from typed Python functions: ``@toolbatch.tool``.

The function's signature becomes a pydantic model that validates the call's arguments and
gives the JSON schema the model sees; its docstring becomes the description (a Google-style
``Args:`` section also describes each argument). Async functions are awaited; sync functions
run in a worker thread.

What the function returns becomes the result: ``str`` as is; parts as given; a pydantic
model or JSON-able value as JSON (and as the display); ``None`` as empty output. ``bytes``
(``bytearray``, ``memoryview``) are binary, never decoded: they are persisted once as a
binary artifact and the model is told their size, their kind when the magic number says
(PNG, JPEG, GIF, WebP, PDF, gzip, zip) and the file's path. An image of at most
``INLINE_IMAGE_MAX_BYTES`` is also attached as ``inlineData`` (its ``persisted_file`` set),
so the model sees it, as it sees an MCP server's image; a larger one is only described.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import inspect
import json
import re
import typing
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar, overload

import anyio
import anyio.to_thread
import pydantic
from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from toolbatch._core import (
    FileDataPart,
    FunctionResponsePart,
    InlineData,
    InlineDataPart,
    Part,
    TextPart,
    ToolCall,
    ToolResult,
    sniff_media,
    text_result,
)
from toolbatch.errors import ToolRegistrationError
from toolbatch.producers._base import (
    DEFAULT_CALL_TIMEOUT_S,
    ProducerContext,
    ToolDeclaration,
    current_time,
)
from toolbatch.producers._binary import persist_binary
from toolbatch.producers._sync_lane import run_sync_on_lane

__all__ = [
    "DEFAULT_OUTPUT_THRESHOLD_CHARS",
    "INLINE_IMAGE_MAX_BYTES",
    "FunctionTool",
    "tool",
]

DEFAULT_OUTPUT_THRESHOLD_CHARS: Final = 25_000
"""Output of a generic tool longer than this is persisted and previewed."""
INLINE_IMAGE_MAX_BYTES: Final = 5_000_000
"""An image returned as bytes is attached inline up to this size (Anthropic's per-image
limit, the smallest of the model APIs toolbatch maps); a larger one is only described."""

_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
_PART_TYPES: Final = (TextPart, FunctionResponsePart, InlineDataPart, FileDataPart)
_UNSET: Final = object()

F = TypeVar("F", bound=Callable[..., Any])


def validate_tool_name(name: object) -> str:
    """Return ``name`` if it is a usable tool name, else raise ToolRegistrationError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ToolRegistrationError(
            f"tool name must start with a letter or '_' and hold at most 128 letters, digits "
            f"or '_.:-', got {name!r}; pass @tool(name=...)",
            name=name if isinstance(name, str) else None,
        )
    return name


def _docstring_parts(func: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The description (docstring without its Args section) and per-argument texts."""
    doc = inspect.getdoc(func) or ""
    described: dict[str, str] = {}
    kept: list[str] = []
    in_args = False
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in {"Args:", "Arguments:", "Parameters:"}:
            in_args = True
            continue
        if in_args:
            if stripped and not line.startswith((" ", "\t")):
                in_args = False
            else:
                match = re.match(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?:\s*(.*)$", line)
                if match and (len(line) - len(line.lstrip())) <= 4:
                    current = match.group(1).lstrip("*")
                    described[current] = match.group(2).strip()
                elif current and stripped:
                    described[current] = f"{described[current]} {stripped}".strip()
                continue
        kept.append(line)
    return "\n".join(kept).strip(), described


class FunctionTool:
    """A Producer made from a typed Python function (what ``@toolbatch.tool`` returns).

    The object stays callable like the original function, so decorated functions can still
    be used directly.

    Attributes:
        output_threshold: output longer than this many characters is persisted once and
            replaced by a preview naming the file (``None``: never).
        timeout_s: the longest one call may run (the runtime's ceiling still applies).
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        output_threshold: int | None = DEFAULT_OUTPUT_THRESHOLD_CHARS,
        needs_permission: bool = False,
        read_only: bool = False,
        timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
    ) -> None:
        if not callable(func):
            raise ToolRegistrationError(f"@tool needs a function, got {func!r}")
        tool_name = validate_tool_name(name if name is not None else func.__name__)
        if output_threshold is not None and (
            isinstance(output_threshold, bool)
            or not isinstance(output_threshold, int)
            or output_threshold <= 0
        ):
            raise ToolRegistrationError(
                f"output_threshold must be a positive int of characters or None (never "
                f"persist), got {output_threshold!r}",
                name=tool_name,
            )
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or timeout_s <= 0:
            raise ToolRegistrationError(
                f"timeout_s must be a positive number of seconds, got {timeout_s!r}",
                name=tool_name,
            )
        self.func = func
        self.output_threshold = output_threshold
        self.timeout_s = float(timeout_s)
        self._is_async = inspect.iscoroutinefunction(func)
        doc, arg_docs = _docstring_parts(func)
        self._context_param, self._args_model = _args_model(func, tool_name, arg_docs)
        self._takes_args = bool(self._args_model.model_fields)
        schema = self._args_model.model_json_schema()
        schema.pop("title", None)
        self._declaration = ToolDeclaration(
            name=tool_name,
            description=description if description is not None else doc,
            input_schema=schema,
            needs_permission=needs_permission,
            read_only=read_only,
            timeout_s=timeout_s,
            output_threshold=output_threshold,
        )
        functools.update_wrapper(self, func)

    @property
    def declaration(self) -> ToolDeclaration:
        """The tool's name, description and JSON schema, for the model."""
        return self._declaration

    @property
    def name(self) -> str:
        """The tool's name."""
        return self._declaration.name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def _call(self, kwargs: dict[str, Any]) -> Awaitable[Any]:
        """The function's own coroutine, or the sync function's run on the lane (no
        coroutine of its own in between: one frame less per call)."""
        if self._is_async:
            return self.func(**kwargs)  # type: ignore[no-any-return]
        # A sync function cannot be interrupted: on cancellation or timeout the thread is
        # abandoned (it sees context.cancelled set) and the call moves on. The lane hands
        # results back to the loop in bulk (toolbatch.producers._sync_lane).
        return run_sync_on_lane(functools.partial(self.func, **kwargs))

    def __repr__(self) -> str:
        return f"<FunctionTool {self.name!r} wrapping {self.func!r}>"

    async def run(self, call: ToolCall, context: ProducerContext) -> ToolResult:
        """Validate the arguments, call the function, and wrap what it returns."""
        kwargs: dict[str, Any]
        if self._takes_args or call.args:
            try:
                parsed = self._args_model.model_validate(call.args)
            except ValidationError as exc:
                return ToolResult.failure(_describe_validation(self.name, exc), type="invalid_args")
            kwargs = dict(parsed.__dict__)  # exactly the declared arguments (extra="forbid")
        else:
            kwargs = {}  # a tool without arguments, called without any: nothing to check
        if self._context_param is not None:
            kwargs[self._context_param] = context
            if not self._is_async:
                context.cancelled  # noqa: B018 -- made on the loop, before the thread polls it
        limit = self.timeout_s
        if context.timeout_s is not None:
            limit = min(limit, context.timeout_s)
        scope: anyio.CancelScope | None = None
        try:
            if context.deadline is not None and context.deadline <= current_time() + limit:
                # The runtime stops the call in time and answers it: no scope of our own.
                value = await self._call(kwargs)
            else:
                with anyio.move_on_after(limit) as scope:
                    value = await self._call(kwargs)
        except anyio.get_cancelled_exc_class():
            if _cancel_requested():
                raise
            # The tool raised CancelledError itself: its failure, not a timeout or an abort.
            return ToolResult.failure(
                f"tool {self.name!r} failed: it raised CancelledError although nothing "
                f"cancelled it; a tool should raise an ordinary exception to fail",
                type="tool_crashed",
            )
        if scope is not None and scope.cancelled_caught:
            context.cancelled.set()
            return ToolResult.failure(
                f"tool {self.name!r} did not finish within {limit:g} s and was stopped; "
                f"retry with less work or raise its timeout",
                type="timeout",
            )
        if isinstance(value, bytes | bytearray | memoryview):
            return await _binary_result(bytes(value), call, context)
        return _to_result(value)


def _cancel_requested() -> bool:
    """Whether the running task was really cancelled (asyncio counts the requests), rather
    than a tool raising ``CancelledError`` of its own accord. Outside asyncio: assume so."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        return True
    return task is None or task.cancelling() > 0


def _args_model(
    func: Callable[..., Any], tool_name: str, arg_docs: dict[str, str]
) -> tuple[str | None, type[BaseModel]]:
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:  # unresolvable annotations: a registration error, not a crash
        raise ToolRegistrationError(
            f"cannot read the annotations of {tool_name!r}: {exc}", name=tool_name
        ) from exc
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(func).parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ToolRegistrationError(
                f"tool {tool_name!r} takes *{param.name}; give every argument a name and a "
                f"type so the model can be told about it",
                name=tool_name,
            )
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ToolRegistrationError(
                f"tool {tool_name!r} has positional-only argument {param.name!r}; tools are "
                f"called with keyword arguments",
                name=tool_name,
            )
        annotation = hints.get(param.name, Any)
        if annotation is ProducerContext:
            context_param = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (
            annotation,
            pydantic.Field(default=default, description=arg_docs.get(param.name)),
        )
    try:
        model = pydantic.create_model(
            f"{tool_name}_args",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        model.model_json_schema()
    except Exception as exc:  # a type pydantic cannot validate or describe
        raise ToolRegistrationError(
            f"tool {tool_name!r} has an argument type the model cannot be told about: {exc}",
            name=tool_name,
        ) from exc
    return context_param, model


def _describe_validation(tool_name: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False)[:10]:
        where = ".".join(str(p) for p in error["loc"]) or "(arguments)"
        given = error.get("input", _UNSET)
        shown = "" if given is _UNSET else f" (got {json.dumps(given, default=repr)[:80]})"
        problems.append(f"{where}: {error['msg']}{shown}")
    return f"invalid arguments for {tool_name!r}: " + "; ".join(problems)


_JSON_VALUE: Final[pydantic.TypeAdapter[JsonValue]] = pydantic.TypeAdapter(
    JsonValue, config=pydantic.ConfigDict(defer_build=True)
)
"""Built once: a TypeAdapter costs about a millisecond to build, far more than a call."""


def _to_result(value: object) -> ToolResult:
    """Wrap whatever a tool function returned as a ToolResult."""
    if type(value) is str:  # the usual return: first, and unvalidated
        return text_result(value)
    if type(value) is int:  # its JSON text is str(): no validation, no encoder (3 µs a call)
        return ToolResult(content=str(value), display=value)
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return text_result("")
    if isinstance(value, str):
        return ToolResult(content=value)
    if isinstance(value, _PART_TYPES):
        return ToolResult(content=[value])
    if isinstance(value, list) and value and all(isinstance(v, _PART_TYPES) for v in value):
        parts: list[Part] = list(value)
        return ToolResult(content=parts)
    if isinstance(value, BaseModel):
        return ToolResult(content=value.model_dump_json(), display=value.model_dump(mode="json"))
    try:
        display: JsonValue = _JSON_VALUE.validate_python(value)
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValidationError, TypeError, ValueError):
        return ToolResult(content=str(value))
    return ToolResult(content=text, display=display)


async def _binary_result(data: bytes, call: ToolCall, context: ProducerContext) -> ToolResult:
    """Bytes a tool returned: persisted once, described, and attached when an image."""
    media = sniff_media(data)
    saved = await persist_binary(
        data,
        call=call,
        store=context.store,
        suffix=".bin" if media is None else media.suffix,
        deadline=context.deadline,
    )
    kind = "" if media is None else f", {media.description}"
    inline = media is not None and media.is_image and len(data) <= INLINE_IMAGE_MAX_BYTES
    shown = "attached below" if inline else "not shown"
    description = f"[binary result: {len(data):,} bytes{kind}, {shown}; {saved.where()}]"
    content: list[Part] = [TextPart(text=description)]
    if inline:
        assert media is not None
        image = InlineData(
            mime_type=media.mime_type,
            data=base64.b64encode(data).decode("ascii"),
            persisted_file=saved.path if saved.kept_bytes == len(data) else None,
        )
        content.append(InlineDataPart(inline_data=image))
    return ToolResult(content=content, display=description, persisted_output_files=saved.files)


@overload
def tool(func: F, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    output_threshold: int | None = DEFAULT_OUTPUT_THRESHOLD_CHARS,
    needs_permission: bool = False,
    read_only: bool = False,
    timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
) -> Callable[[F], FunctionTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    output_threshold: int | None = DEFAULT_OUTPUT_THRESHOLD_CHARS,
    needs_permission: bool = False,
    read_only: bool = False,
    timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
) -> FunctionTool | Callable[[F], FunctionTool]:
    """Turn a typed (async or sync) function into a tool.

    Use bare (``@tool``) or with options (``@tool(name="grep", output_threshold=10_000)``).
    Register the result with ``registry.register(...)``. A parameter annotated
    ``ProducerContext`` receives the call's context instead of a model argument.

    Args:
        func: the function (when used bare).
        name: the tool name (default: the function's name).
        description: what the model is told (default: the docstring).
        output_threshold: characters of output above which it is persisted and previewed;
            ``None`` never persists.
        needs_permission: whether interactive front ends ask the user before running it.
        read_only: whether it only reads (speculative runs may run it ahead of time).
        timeout_s: the longest one call may run.
    """

    def wrap(target: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            target,
            name=name,
            description=description,
            output_threshold=output_threshold,
            needs_permission=needs_permission,
            read_only=read_only,
            timeout_s=timeout_s,
        )

    if func is not None:
        return wrap(func)
    return wrap
