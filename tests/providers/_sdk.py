"""Checks a value against an official SDK's ``...Param`` TypedDict, strictly.

pydantic's ``TypeAdapter`` of these types ignores unknown keys and validates ``Iterable``
fields lazily (a list of wrong blocks passes ``validate_python``), so it would not catch a
misspelt key or a wrong block. This walks the SDK's own type hints instead: required keys
present, no unknown keys, literals matched, unions satisfied by at least one branch, every
list item checked. The hints are the SDK's; only the walking is ours.
"""

from __future__ import annotations

import collections.abc
import importlib
import types
import typing
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

import typing_extensions
from typing_extensions import is_typeddict

__all__ = [
    "Sdk",
    "anthropic_sdk",
    "assert_conforms",
    "chat_sdk",
    "genai",
    "problems",
    "responses_sdk",
]


class Sdk:
    """An SDK's types module, imported on its first use.

    The SDKs take seconds of CPU to import; imported at module level, every xdist worker
    paid that while collecting, though one worker runs these tests (``tests/conftest.py``).
    """

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            # pytest's collection probes every module global (``_mock_name``, ``__test__``,
            # ``__wrapped__``...): answering those imported the SDK on every worker after all.
            raise AttributeError(name)
        return getattr(importlib.import_module(self._module), name)


anthropic_sdk = Sdk("anthropic.types")
chat_sdk = Sdk("openai.types.chat")
responses_sdk = Sdk("openai.types.responses")
genai = Sdk("google.genai.types")

_WRAPPERS = {
    typing_extensions.Required,
    typing_extensions.NotRequired,
    typing_extensions.ReadOnly,
    typing.Required,
    typing.NotRequired,
}
_SEQUENCES = (collections.abc.Iterable, collections.abc.Sequence, list, tuple)


@cache
def _hints(typed_dict: type) -> dict[str, Any]:
    return typing.get_type_hints(typed_dict, include_extras=True)


def _unwrap(hint: Any) -> Any:
    while get_origin(hint) in _WRAPPERS or get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    return hint


def problems(value: Any, hint: Any, path: str = "$") -> list[str]:
    """Why ``value`` does not conform to ``hint`` (empty when it does)."""
    hint = _unwrap(hint)
    origin = get_origin(hint)
    if hint is Any or hint is object:
        return []
    if hint is type(None) or hint is None:
        return [] if value is None else [f"{path}: expected null, got {value!r:.60}"]
    if origin in (Union, types.UnionType):
        found = [problems(value, arm, path) for arm in get_args(hint)]
        if any(not arm for arm in found):
            return []
        # Report the arm that matched deepest: its problems are the informative ones.
        return max(found, key=lambda arm: max(len(p.split(": ", 1)[0]) for p in arm))
    if origin is Literal:
        allowed = get_args(hint)
        return [] if value in allowed else [f"{path}: {value!r:.60} is not one of {allowed}"]
    if is_typeddict(hint):
        return _typed_dict(value, hint, path)
    if origin is not None and (
        origin in _SEQUENCES or getattr(origin, "__name__", "") == "SequenceNotStr"
    ):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        (item,) = get_args(hint)[:1] or (Any,)
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{path}[{i}]")]
    if origin in (dict, collections.abc.Mapping) or hint in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        args = get_args(hint) or (str, Any)
        return [p for k, v in value.items() for p in problems(v, args[1], f"{path}.{k}")]
    if hint is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean, got {value!r:.60}"]
    if hint in (int, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected a number, got {value!r:.60}"]
    if hint is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string, got {value!r:.60}"]
    if isinstance(hint, type):
        return [] if isinstance(value, hint) else [f"{path}: expected {hint.__name__}"]
    if origin is not None and isinstance(origin, type):
        return [] if isinstance(value, origin) else [f"{path}: expected {origin.__name__}"]
    return [f"{path}: cannot check against {hint!r}"]


def _typed_dict(value: Any, typed_dict: type, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected {typed_dict.__name__}, got {type(value).__name__}"]
    hints = _hints(typed_dict)
    found = [
        f"{path}.{key}: not a field of {typed_dict.__name__}" for key in value if key not in hints
    ]
    required: frozenset[str] = typed_dict.__required_keys__  # type: ignore[attr-defined]
    found += [
        f"{path}.{key}: required by {typed_dict.__name__}" for key in required if key not in value
    ]
    for key, item in value.items():
        if key in hints:
            found += problems(item, hints[key], f"{path}.{key}")
    return found


def assert_conforms(value: Any, hint: Any) -> None:
    """Fail with every problem found when ``value`` does not conform to ``hint``."""
    found = problems(value, hint)
    assert not found, "\n".join(found[:20])
