"""The tool registry: which producer answers which tool name."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator
from typing import Any

from toolbatch._core import ToolDeclaration
from toolbatch.errors import ToolRegistrationError
from toolbatch.producers import FunctionTool, Producer, ShellProducer, validate_tool_name

__all__ = ["Registry", "default_registry"]


def _as_producer(obj: object) -> Producer:
    if isinstance(obj, FunctionTool):
        return obj
    declaration = getattr(obj, "declaration", None)
    run = getattr(obj, "run", None)
    if declaration is not None or run is not None:
        if not isinstance(declaration, ToolDeclaration):
            raise ToolRegistrationError(
                f"producer {obj!r} has declaration={declaration!r}; it must be a "
                f"toolbatch.producers.ToolDeclaration"
            )
        if run is None or not inspect.iscoroutinefunction(run):
            raise ToolRegistrationError(
                f"producer {declaration.name!r} needs an 'async def run(call, context)' method",
                name=declaration.name,
            )
        validate_tool_name(declaration.name)
        return obj  # type: ignore[return-value]  # checked structurally above
    if callable(obj):
        return FunctionTool(obj)
    raise ToolRegistrationError(
        f"cannot register {obj!r}: pass a function (optionally decorated with @toolbatch.tool) "
        f"or a Producer (an object with .declaration and async .run(call, context))"
    )


class Registry:
    """Tool names to producers; lists declarations for the model.

    ``register`` takes a function (decorated with ``@toolbatch.tool`` or plain, in which
    case it is wrapped with the defaults) or any ``Producer``.
    """

    def __init__(self, tools: Iterable[object] = ()) -> None:
        self._producers: dict[str, Producer] = {}
        for item in tools:
            self.register(item)

    def register(self, obj: object, *, replace: bool = False) -> Producer:
        """Add a tool; returns the producer that now answers its name.

        Raises:
            ToolRegistrationError: ``obj`` is not a tool, or its name is taken (pass
                ``replace=True`` to swap it).
        """
        producer = _as_producer(obj)
        name = producer.declaration.name
        if name in self._producers and not replace:
            raise ToolRegistrationError(
                f"a tool named {name!r} is already registered; pass replace=True to swap it "
                f"or give the new one another name",
                name=name,
            )
        self._producers[name] = producer
        return producer

    def unregister(self, name: str) -> None:
        """Remove the tool called ``name`` (no error if there is none)."""
        self._producers.pop(name, None)

    def get(self, name: str) -> Producer | None:
        """The producer for ``name``, or ``None``."""
        return self._producers.get(name)

    def declarations(self) -> list[ToolDeclaration]:
        """The function declarations to give the model, in registration order."""
        return [producer.declaration for producer in self._producers.values()]

    def producers(self) -> dict[str, Producer]:
        """Tool names to producers, in registration order (a copy)."""
        return dict(self._producers)

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._producers)

    def copy(self) -> Registry:
        """A registry with the same producers (adding to it leaves this one alone)."""
        clone = Registry()
        clone._producers = dict(self._producers)
        return clone

    def __contains__(self, name: object) -> bool:
        return name in self._producers

    def __iter__(self) -> Iterator[str]:
        return iter(self._producers)

    def __len__(self) -> int:
        return len(self._producers)

    def __repr__(self) -> str:
        return f"Registry({self.names()!r})"


def default_registry(**shell_options: Any) -> Registry:
    """A registry holding the built-in tools: ``run_shell_command``.

    Keyword arguments configure the shell producer (see ``ShellProducer``).
    """

    return Registry([ShellProducer(**shell_options)])
