"""``toolbatch run``'s cold start loads only what running a batch needs (issue 33).

The time itself is a ``make bench`` row (``bench/bench_cli.py``); these tests pin what the
time rests on, which a loaded machine cannot blur: the modules a start imports, the models
it builds, and that the logs read the same without rich's tracebacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.cli._support import ROOT

HEAVY = (
    "rich",  # through structlog, for tracebacks the command never renders
    "attr",
    "pygments",
    "mcp",  # MCP SDK: only with --mcp-config
    "httpx",
    "acp",  # the ACP SDK's schema: only for `toolbatch acp`
    "opentelemetry",
    "openai",
    "anthropic",
    "ray",
)

_PROBE = """
import json, sys
import toolbatch.cli
from pydantic import BaseModel

def built(cls):
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("toolbatch") and sub.__pydantic_complete__:
            yield sub.__name__
        yield from built(sub)

print(json.dumps({"modules": sorted({m.split(".")[0] for m in sys.modules}),
                  "built": sorted(built(BaseModel))}))
"""


def _probe(code: str) -> dict[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    loaded: dict[str, list[str]] = json.loads(done.stdout)
    return loaded


def test_the_command_imports_no_sdk_and_builds_no_model() -> None:
    """Importing the command loads none of the heavy optional libraries and builds no
    pydantic model: each is paid by the subcommand or the first call that needs it."""
    loaded = _probe(_PROBE)
    assert [name for name in HEAVY if name in loaded["modules"]] == []
    assert loaded["built"] == []


def test_rich_stays_importable_after_the_command_starts() -> None:
    """Only structlog's optional use of rich is skipped; a tool that imports rich gets it."""
    code = (
        "import json, toolbatch.cli, rich.console; print(json.dumps({'modules': [], 'built': []}))"
    )
    try:
        import rich  # noqa: F401
    except ImportError:
        pytest.skip("rich is not installed")
    _probe(code)


def test_logged_exceptions_read_as_plain_tracebacks() -> None:
    """configure_logging renders an exception as Python prints it, rich installed or not."""
    code = """
import structlog, toolbatch
toolbatch.configure_logging("error")
try:
    raise ValueError("the cause")
except ValueError:
    structlog.get_logger("t").exception("failed.visibly")
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert "failed.visibly" in done.stderr
    assert "Traceback (most recent call last):" in done.stderr
    assert "ValueError: the cause" in done.stderr
    assert "╭" not in done.stderr  # rich's boxed traceback


_RUN_PROBE = """
import json, sys
import toolbatch.cli
from pydantic import BaseModel, TypeAdapter
import gc

sys.argv = ["toolbatch", "run", "-"]
code = toolbatch.cli.main()

def built(cls):
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("toolbatch") and sub.__pydantic_complete__:
            yield sub.__name__
        yield from built(sub)

adapters = [o for o in gc.get_objects() if isinstance(o, TypeAdapter) and o.pydantic_complete]
print(json.dumps({"code": code, "built": sorted(built(BaseModel)), "adapters": len(adapters)}),
      file=sys.stderr)
"""


def test_an_empty_text_run_builds_no_pydantic_model() -> None:
    """``echo '[]' | toolbatch run -`` builds no pydantic model or adapter: the tool list is
    plain ``ToolDeclaration`` values, the batch takes the plain path and the text output
    makes no parts JSON (their serializer)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _RUN_PROBE],
        input="[]",
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "0 calls: 0 of 200,000 characters of tool output sent to the model\n"
    probe = json.loads(done.stderr.strip().splitlines()[-1])
    assert probe == {"code": 0, "built": [], "adapters": 0}
