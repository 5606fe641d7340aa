"""The package's layers: dependencies point one way, and nothing imports upward."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "toolbatch"

# Each layer may import only from the layers listed before it (and from itself).
LAYERS: list[set[str]] = [
    {"_core", "errors", "logs"},
    {"telemetry"},
    {"sandbox"},
    {"artifacts"},
    {"producers", "finalize", "hooks", "transports", "providers", "permissions"},
    {"recorder", "scheduler"},
    {"agent", "testing"},
    {"service", "acp", "ray", "integrations"},
    {"cli", "__init__"},
]
SIBLING_RULES = {
    # Peers in one layer that still must not know each other.
    "producers": {"finalize", "hooks", "transports"},
    "finalize": {"producers", "hooks", "transports"},
    "hooks": {"producers", "finalize", "transports"},
    "transports": {"finalize", "hooks"},
    "providers": {"producers", "finalize", "hooks", "transports"},
    "permissions": {"producers", "finalize", "hooks", "transports", "providers"},
    "recorder": {"scheduler"},
    "service": {"acp"},
    "acp": {"service"},
    "ray": {"service", "acp"},
    "integrations": {"service", "acp", "ray"},
}


def _layer_of(name: str) -> int:
    for index, layer in enumerate(LAYERS):
        if name in layer:
            return index
    raise AssertionError(f"toolbatch.{name} is in no layer; add it to LAYERS")


def _top(module: Path) -> str:
    relative = module.relative_to(PACKAGE)
    first = relative.parts[0]
    return first.removesuffix(".py")


def _imports(module: Path) -> set[str]:
    tree = ast.parse(module.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "toolbatch":
                if len(parts) > 1:
                    found.add(parts[1])
                else:
                    found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "toolbatch" and len(parts) > 1:
                    found.add(parts[1])
    return found


def _is_module(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def _layer_violations(module: Path) -> list[str]:
    own = _top(module)
    own_layer = _layer_of(own)
    where = module.relative_to(PACKAGE)
    found = []
    for imported in _imports(module):
        if imported == own or not _is_module(imported):
            continue  # a name imported from the package itself (toolbatch/__init__)
        if _layer_of(imported) > own_layer:
            found.append(f"{where} imports toolbatch.{imported}, a higher layer")
        if imported in SIBLING_RULES.get(own, set()):
            found.append(f"{where} imports its peer toolbatch.{imported}")
    return found


def test_modules_import_only_from_their_layer_or_below() -> None:
    """No module imports a layer above its own, nor a sibling it must not know."""
    assert [v for module in MODULES for v in _layer_violations(module)] == []


def _private_imports(module: Path) -> list[str]:
    """``toolbatch.<pkg>._private`` modules imported from outside ``<pkg>``."""
    own = _top(module)
    found = []
    for node in ast.walk(ast.parse(module.read_text())):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] != "toolbatch" or len(parts) < 3 or parts[1] == own:
                continue
            if any(part.startswith("_") for part in parts[2:]):
                found.append(name)
    return found


def test_packages_are_entered_only_through_their_init() -> None:
    """No module imports another package's private module (only its ``__init__``)."""
    assert {
        str(m.relative_to(PACKAGE)): _private_imports(m) for m in MODULES if _private_imports(m)
    } == {}


def test_no_relative_imports() -> None:
    """Every import names its package, so the two checks above see it."""
    relative = [
        str(m.relative_to(PACKAGE))
        for m in MODULES
        for node in ast.walk(ast.parse(m.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level > 0
    ]
    assert relative == []


def test_top_level_holds_only_packages_and_public_modules() -> None:
    """No private module at the top: private helpers live in ``_core`` or their package."""
    loose = sorted(
        p.name for p in PACKAGE.glob("_*.py") if p.name not in {"__init__.py", "__main__.py"}
    )
    assert loose == []
