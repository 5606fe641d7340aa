"""Pydantic is used through its API, never its internals (STYLE 21, issue 30 item 3).

A scan of the package source, no imports: nothing names a ``__pydantic_*__`` attribute
other than ``__pydantic_config__`` (how a plain dataclass gives pydantic its config), nothing
writes a model's ``__dict__`` or reads ``BaseModel.__dict__``'s descriptors, and nothing
builds or sets a pydantic model through ``object.__new__`` / ``object.__setattr__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "toolbatch"

_ALLOWED_DUNDERS = frozenset({"__pydantic_config__"})
_V1_INTERNALS = frozenset({"__fields_set__", "__fields__"})
_PYDANTIC_BASES = frozenset({"BaseModel", "RootModel"})
_MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__"})


def _is_internal_name(name: str) -> bool:
    if name in _V1_INTERNALS:
        return True
    return name.startswith("__pydantic_") and name not in _ALLOWED_DUNDERS


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):  # RootModel[int]
        return _base_name(node.value)
    return None


def _model_classes(trees: list[ast.Module]) -> frozenset[str]:
    """The names of every class in ``trees`` that is a pydantic model (to a fixpoint)."""
    models = set(_PYDANTIC_BASES)
    classes = [node for tree in trees for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    changed = True
    while changed:
        changed = False
        for node in classes:
            if node.name not in models and any(_base_name(b) in models for b in node.bases):
                models.add(node.name)
                changed = True
    return frozenset(models)


def _is_object_attr(node: ast.expr, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "object"
    )


class _Scan(ast.NodeVisitor):
    def __init__(self, where: str, models: frozenset[str]) -> None:
        self.where = where
        self.models = models
        self.found: list[str] = []
        self._in_model: list[bool] = [False]
        self._new_aliases = {"object.__new__"}
        self._setattr_aliases = {"object.__setattr__"}

    def _flag(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.where}:{getattr(node, 'lineno', '?')}: {what}")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._in_model.append(node.name in self.models)
        self.generic_visit(node)
        self._in_model.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        # ``_new = object.__new__``: remember the alias, so a call through it is checked too.
        for target in node.targets:
            if isinstance(target, ast.Name):
                if _is_object_attr(node.value, "__new__"):
                    self._new_aliases.add(target.id)
                if _is_object_attr(node.value, "__setattr__"):
                    self._setattr_aliases.add(target.id)
            if isinstance(target, ast.Subscript) and self._is_dict_of_anything(target.value):
                self._flag(node, "writes an object's __dict__ directly")
            if isinstance(target, ast.Attribute) and target.attr == "__dict__":
                self._flag(node, "replaces an object's __dict__")
        self.generic_visit(node)

    @staticmethod
    def _is_dict_of_anything(node: ast.expr) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "__dict__"

    def _callee(self, node: ast.expr) -> str | None:
        if _is_object_attr(node, "__new__"):
            return "object.__new__"
        if _is_object_attr(node, "__setattr__"):
            return "object.__setattr__"
        if isinstance(node, ast.Name):
            if node.id in self._new_aliases:
                return "object.__new__"
            if node.id in self._setattr_aliases:
                return "object.__setattr__"
        return None

    def visit_Call(self, node: ast.Call) -> None:
        callee = self._callee(node.func)
        built = _base_name(node.args[0]) if node.args else None
        if callee == "object.__new__" and built in self.models:
            self._flag(node, f"builds pydantic model {built} with object.__new__")
        if callee == "object.__setattr__" and self._in_model[-1]:
            self._flag(node, "sets a pydantic model's attribute with object.__setattr__")
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _MUTATORS
            and self._is_dict_of_anything(func.value)
        ):
            self._flag(node, f"mutates an object's __dict__ ({func.attr})")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _is_internal_name(node.attr):
            self._flag(node, f"uses pydantic internal {node.attr}")
        if node.attr == "__dict__" and _base_name(node.value) in self.models:
            self._flag(node, f"reaches into {_base_name(node.value)}.__dict__")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if _is_internal_name(node.id):
            self._flag(node, f"uses pydantic internal {node.id}")

    def visit_Constant(self, node: ast.Constant) -> None:
        # getattr(model, "__pydantic_extra__"), BaseModel.__dict__["__pydantic_fields_set__"]
        if isinstance(node.value, str) and _is_internal_name(node.value):
            self._flag(node, f"names pydantic internal {node.value!r}")


def _scan(sources: dict[str, str]) -> list[str]:
    trees = {where: ast.parse(text) for where, text in sources.items()}
    models = _model_classes(list(trees.values()))
    found: list[str] = []
    for where, tree in trees.items():
        scan = _Scan(where, models)
        scan.visit(tree)
        found.extend(scan.found)
    return found


def test_the_package_uses_pydantic_only_through_its_api() -> None:
    """No module of toolbatch writes or reads pydantic's internals (the scan finds none)."""
    sources = {
        str(path.relative_to(PACKAGE.parent)): path.read_text(encoding="utf-8")
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    assert _scan(sources) == []


# What the scan must catch: the 0.2 ``trusted_call`` and its like, and what it must leave alone.
_OLD_TRUSTED_CALL = """
from pydantic import BaseModel
class ToolCall(BaseModel):
    id: str
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_new_instance = object.__new__
_set_attribute = object.__setattr__
def trusted_call(call_id):
    call = _new_instance(ToolCall)
    _set_attribute(call, "id", call_id)
    _set_fields_set(call, {"id"})
    return call
"""


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            _OLD_TRUSTED_CALL,
            [
                "reaches into BaseModel.__dict__",
                "names pydantic internal '__pydantic_fields_set__'",
                "builds pydantic model ToolCall with object.__new__",
            ],
            id="old-trusted-call",
        ),
        pytest.param(
            "def f(model):\n    model.__pydantic_extra__ = None\n",
            ["uses pydantic internal __pydantic_extra__"],
            id="set-extra",
        ),
        pytest.param(
            "def f(model):\n    setattr(model, '__pydantic_private__', None)\n",
            ["names pydantic internal '__pydantic_private__'"],
            id="setattr-by-name",
        ),
        pytest.param(
            "def f(model):\n    model.__dict__['id'] = 'x'\n",
            ["writes an object's __dict__ directly"],
            id="dict-item",
        ),
        pytest.param(
            "def f(model):\n    model.__dict__.update(id='x')\n",
            ["mutates an object's __dict__ (update)"],
            id="dict-update",
        ),
        pytest.param(
            "from pydantic import BaseModel\nclass Base(BaseModel):\n    pass\n"
            "class Leaf(Base):\n    def model_post_init(self, context):\n"
            "        object.__setattr__(self, 'x', 1)\n",
            ["sets a pydantic model's attribute with object.__setattr__"],
            id="setattr-in-a-model",
        ),
        pytest.param(
            "def f(model):\n    return model.__fields_set__\n",
            ["uses pydantic internal __fields_set__"],
            id="v1-fields-set",
        ),
        pytest.param(
            "from dataclasses import dataclass\nfrom typing import ClassVar\n"
            "@dataclass(frozen=True, slots=True)\nclass Plain:\n"
            "    __pydantic_config__: ClassVar[dict] = {}\n    x: int = 0\n"
            "    def __post_init__(self):\n        object.__setattr__(self, 'x', 1)\n"
            "_new = object.__new__\ndef build():\n    return _new(Plain)\n",
            [],
            id="plain-dataclass-allowed",
        ),
        pytest.param(
            "from pydantic import BaseModel\nclass M(BaseModel):\n    x: int\n"
            "def f():\n    return M.model_construct(x=1), M.model_validate({'x': 1})\n",
            [],
            id="public-api-allowed",
        ),
    ],
)
def test_the_scan_finds_what_it_must(source: str, expected: list[str]) -> None:
    """The scan flags each way of reaching into pydantic, and nothing a plain class does."""
    found = [line.split(": ", 1)[1] for line in _scan({"m.py": source})]
    assert found == expected
