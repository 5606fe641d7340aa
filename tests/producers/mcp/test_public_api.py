"""toolbatch.producers.mcp's public surface: the names the scheduler and users rely on."""

from __future__ import annotations

import toolbatch.producers.mcp as mcp_package


def _isort_key(name: str) -> tuple[int, str]:
    if name.upper() == name:
        return (0, name)
    return (1 if name[:1].isupper() else 2, name)


def test_all_is_sorted_and_resolves() -> None:
    """__all__ is in ruff's order (constants, classes, functions) and every name exists."""
    names = list(mcp_package.__all__)
    assert names == sorted(names, key=_isort_key)
    for name in names:
        assert hasattr(mcp_package, name), name


def test_the_contract_names_are_exported() -> None:
    """load_mcp_config, McpConfig, McpServers and the producer class are public."""
    for name in ("load_mcp_config", "McpConfig", "McpServers", "McpToolProducer"):
        assert name in mcp_package.__all__
