"""``toolbatch acp`` flags: bad values stop it before it speaks, with the value and the fix."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from toolbatch.acp import AcpOptions
from toolbatch.cli._main import main as cli_main
from toolbatch.cli._options import _parser
from toolbatch.cli._runtime import _acp_options


@pytest.fixture(autouse=True)
def _logging_put_back() -> Iterator[None]:
    """``main`` configures logging to this test's (captured, then closed) stderr: undo it."""
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


def main(argv: list[str]) -> int:
    """``toolbatch acp <argv>``, in this process; the logging it configures is put back."""
    saved = structlog.get_config()
    try:
        return cli_main(["acp", *argv])
    finally:
        structlog.configure(**saved)


def parse_options(argv: list[str]) -> AcpOptions:
    """The options ``toolbatch acp <argv>`` runs with."""
    return _acp_options(_parser().parse_args(["acp", *argv]))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--budget", "-5"], "budget must be a whole number of characters >= 0", id="budget"
        ),
        pytest.param(
            ["--concurrency", "0"], "must be a whole number >= 1, got '0'", id="concurrency"
        ),
        pytest.param(["--timeout", "0"], "must be a number of seconds > 0, got '0'", id="timeout"),
        pytest.param(["--mcp-config", "/nonexistent/mcp.json"], "/nonexistent/mcp.json", id="mcp"),
    ],
)
def test_a_bad_option_exits_2_naming_it(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent refuses to start; stderr names the value; stdout (the protocol) stays empty."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


def test_the_openai_model_needs_its_name_before_the_editor_connects(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--model openai without OPENAI_MODEL: exit 2 and say which variable to set."""
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    assert main(["--model", "openai"]) == 2
    assert "OPENAI_MODEL" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("model", "variable"),
    [
        pytest.param("openai-responses", "OPENAI_MODEL", id="openai-responses"),
        pytest.param("anthropic", "ANTHROPIC_MODEL", id="anthropic"),
    ],
)
def test_the_sdk_models_need_their_names_before_the_editor_connects(
    model: str, variable: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--model openai-responses|anthropic without a model name: exit 2 naming the variable."""
    monkeypatch.delenv(variable, raising=False)
    assert main(["--model", model]) == 2
    assert variable in capsys.readouterr().err


def test_options_map_to_the_session_configuration(tmp_path: Path) -> None:
    """Each flag lands where a session reads it; --budget 0 turns the budget off."""
    options = parse_options(
        [
            "--auto-approve",
            "--budget",
            "0",
            "--concurrency",
            "3",
            "--timeout",
            "7.5",
            "--transcript-dir",
            str(tmp_path),
        ]
    )
    assert options.auto_approve is True
    assert options.transcript_dir == tmp_path
    config = options.config
    assert config.batch_budget is None
    assert config.concurrency == 3
    assert config.call_timeout == 7.5


def test_help_lists_the_flags_and_returns_0(capsys: pytest.CaptureFixture[str]) -> None:
    """--help answers on stdout and returns instead of exiting the caller."""
    assert main(["--help"]) == 0
    assert "--auto-approve" in capsys.readouterr().out
