"""The shell's environment policy: secrets stay out of ``env`` unless allowed back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolbatch import ToolCall, ToolResult
from toolbatch.producers import ProcessPolicy, ProducerContext, ShellProducer, open_process_policy
from toolbatch.sandbox._environment import (
    DEFAULT_INHERITED_ENV_VARS,
    looks_secret,
    shell_environment,
)
from toolbatch.scheduler import Registry, SchedulerConfig, ToolScheduler

HOST = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/me",
    "LANG": "C.UTF-8",
    "EDITOR": "vi",
    "OPENAI_API_KEY": "sk-fake",
    "AWS_SECRET_ACCESS_KEY": "aws-fake",
    "AWS_REGION": "eu-west-1",
    "GITHUB_TOKEN": "ghp-fake",
    "db_password": "hunter2",
    "GOOGLE_APPLICATION_CREDENTIALS": "/secret.json",
    "my_api_key": "lower-fake",
}


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        pytest.param("OPENAI_API_KEY", True, id="key"),
        pytest.param("my_api_key", True, id="key-lowercase"),
        pytest.param("AWS_SECRET_ACCESS_KEY", True, id="secret"),
        pytest.param("GITHUB_TOKEN", True, id="token"),
        pytest.param("db_password", True, id="password"),
        pytest.param("GOOGLE_APPLICATION_CREDENTIALS", True, id="credential"),
        pytest.param("PATH", False, id="path"),
        pytest.param("AWS_REGION", False, id="region"),
    ],
)
def test_secret_names_are_recognised_in_any_case(name: str, secret: bool) -> None:
    """KEY, SECRET, TOKEN, PASSWORD and CREDENTIAL anywhere in a name, any case."""
    assert looks_secret(name) is secret


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        pytest.param("GITHUB_PAT", "github_pat_x", True, id="pat"),
        pytest.param("SENTRY_DSN", "https://k@o1.ingest.sentry.io/1", True, id="dsn"),
        pytest.param("OTEL_EXPORTER_OTLP_HEADERS", "x-honeycomb-team=k", True, id="otlp"),
        pytest.param("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=k", True, id="otlp-traces"),
        pytest.param("DATABASE_URL", "postgres://app:hunter2@db:5432/app", True, id="url-creds"),
        pytest.param("REDIS", "redis://:hunter2@cache:6379/0", True, id="url-password-only"),
        pytest.param("DATABASE_URL", "postgres://db:5432/app", False, id="url-no-creds"),
        pytest.param("UPSTREAM", "https://user@example.com/", False, id="url-user-only"),
        pytest.param("PATHS", "/a:/b", False, id="colons"),
        pytest.param("OTEL_SERVICE_NAME", "agent", False, id="otel-other"),
    ],
)
def test_pat_dsn_otlp_headers_and_urls_with_a_password_are_secret(
    name: str, value: str, secret: bool
) -> None:
    """Beyond the name parts: *_PAT, *_DSN, the OTLP headers, and user:password@ URLs."""
    assert looks_secret(name, value) is secret
    inherited = shell_environment("inherit", inherited={name: value, "PATH": "/bin"})
    assert (name in inherited) is not secret


def test_inherit_drops_secret_names_and_keeps_the_rest() -> None:
    """The default: the agent's environment minus the secret-looking names."""
    assert shell_environment("inherit", inherited=HOST) == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/me",
        "LANG": "C.UTF-8",
        "EDITOR": "vi",
        "AWS_REGION": "eu-west-1",
    }


def test_minimal_is_the_documented_default_set() -> None:
    """minimal: only DEFAULT_INHERITED_ENV_VARS (what MCP servers and command hooks get)."""
    env = shell_environment("minimal", inherited=HOST)
    assert env == {"PATH": "/usr/bin:/bin", "HOME": "/home/me", "LANG": "C.UTF-8"}
    assert set(env) <= set(DEFAULT_INHERITED_ENV_VARS)


@pytest.mark.parametrize(
    ("mode", "allow", "overrides", "expected"),
    [
        pytest.param("none", (), None, {}, id="none"),
        pytest.param(
            "none",
            ("openai_api_key", "AWS_*"),
            None,
            {
                "OPENAI_API_KEY": "sk-fake",
                "AWS_SECRET_ACCESS_KEY": "aws-fake",
                "AWS_REGION": "eu-west-1",
            },
            id="allow-names-and-globs-any-case",
        ),
        pytest.param(
            "none",
            ("NO_SUCH_*",),
            {"CI": "1", "OPENAI_API_KEY": "set-by-config"},
            {"CI": "1", "OPENAI_API_KEY": "set-by-config"},
            id="set-wins",
        ),
    ],
)
def test_allow_brings_variables_back_and_set_wins(
    mode: Any, allow: tuple[str, ...], overrides: dict[str, str] | None, expected: dict[str, str]
) -> None:
    """allow takes names or globs from the agent's environment; overrides come last."""
    assert shell_environment(mode, allow=allow, overrides=overrides, inherited=HOST) == expected


async def _env_of(policy: ProcessPolicy, producer: ShellProducer | None = None) -> str:
    producer = producer or ShellProducer(policy=policy)
    call = ToolCall(id="c1", name="run_shell_command", args={"command": "env"})
    result: ToolResult = await producer.run(call, ProducerContext())
    assert isinstance(result.content, str)
    return result.content


async def test_env_hides_a_fake_api_key_and_allow_brings_it_back(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A model running ``env`` sees no OPENAI_API_KEY by default; shell_env_allow shows it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-1234")
    monkeypatch.setenv("TOOLBATCH_PLAIN", "visible")
    with open_process_policy(workspace_roots=[tmp_path]) as policy:
        hidden = await _env_of(policy)
    with open_process_policy(
        workspace_roots=[tmp_path], shell_env_allow=["OPENAI_*"], shell_env_set={"CI": "1"}
    ) as policy:
        allowed = await _env_of(policy)
    assert "sk-canary-1234" not in hidden
    assert "TOOLBATCH_PLAIN=visible" in hidden
    assert "OPENAI_API_KEY=sk-canary-1234" in allowed
    assert "CI=1" in allowed.splitlines()


async def test_minimal_and_none_through_a_real_shell(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """minimal keeps PATH and HOME but not other variables; none keeps neither."""
    monkeypatch.setenv("TOOLBATCH_PLAIN", "visible")
    with open_process_policy(workspace_roots=[tmp_path], shell_env="minimal") as policy:
        minimal = await _env_of(policy)
    with open_process_policy(workspace_roots=[tmp_path], shell_env="none") as policy:
        empty = await _env_of(policy)
    assert "HOME=" in minimal
    assert "TOOLBATCH_PLAIN" not in minimal
    assert "HOME=" not in empty
    assert "TOOLBATCH_PLAIN" not in empty


async def test_the_scheduler_passes_its_environment_policy_to_the_shell(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """SchedulerConfig(shell_env_allow=..., shell_env_set=...) reaches the commands."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-5678")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-canary")
    config = SchedulerConfig(
        artifacts_dir=tmp_path / "artifacts",
        workspace_roots=[tmp_path],
        shell_env_allow=["OPENAI_API_KEY"],
        shell_env_set={"CI": "true"},
    )
    async with ToolScheduler(Registry([ShellProducer()]), config) as scheduler:
        turn = await scheduler.run_batch(
            [ToolCall(id="c", name="run_shell_command", args={"command": "env"})]
        )
    text = str(turn.responses[0].parts)
    assert "OPENAI_API_KEY=sk-canary-5678" in text
    assert "ghp-canary" not in text
    assert "CI=true" in text


async def test_an_explicit_producer_env_replaces_the_policy_environment(tmp_path: Path) -> None:
    """ShellProducer(env=...) is the complete environment, whatever the policy says."""
    with open_process_policy(workspace_roots=[tmp_path], shell_env="none") as policy:
        output = await _env_of(policy, ShellProducer(env={"ONLY": "this"}, policy=policy))
    assert "ONLY=this" in output
