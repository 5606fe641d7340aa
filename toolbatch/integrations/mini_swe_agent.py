"""mini-swe-agent: ``ToolbatchEnvironment``, its commands run through toolbatch's shell.

mini-swe-agent's ``LocalEnvironment`` runs each action with ``subprocess.run`` and returns
the whole output; its templates cut long output by hand. ``ToolbatchEnvironment`` is a
``LocalEnvironment`` whose ``execute(action, cwd="", *, timeout=None)`` (the signature of
the installed 2.4) runs the command through toolbatch's shell instead: the sandbox and
environment policy, the output bounded by the batch budget with the path of the file
holding all of it, a process-group kill on timeout, and the turn recorded when a
recorder is configured. It returns what mini-swe-agent reads (``output``, ``returncode``,
``exception_info`` and, on failure, ``extra``) and raises ``Submitted`` as it does, so the
built-in ``mini.yaml`` and its templates run unchanged. Configure it in the YAML by its
import path::

    environment:
      environment_class: toolbatch.integrations.mini_swe_agent.ToolbatchEnvironment
      batch_budget: 8000
      env: {PAGER: cat}

``DefaultAgent`` executes a response's actions one by one, so each action is its own
turn. ``ToolbatchAgent`` (``agent_class: toolbatch.integrations.mini_swe_agent.ToolbatchAgent``)
runs a response's actions as one batch instead (``env.execute_batch``): concurrently, and
bounded together. The default budget, 8,000 characters, keeps every output under the 10,000
at which ``mini.yaml``'s template would cut it again without a file.

mini-swe-agent is synchronous; the environment runs a ``ToolScheduler`` on an event loop in
a daemon thread, started on the first command. ``close()`` (or ``with``) stops it; it is
also stopped when the environment is collected or the interpreter exits. A
``KeyboardInterrupt`` (or any exception) while a command runs aborts it, the process group
is stopped, and the exception propagates.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Final

import anyio
from anyio.from_thread import BlockingPortal
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment, LocalEnvironmentConfig

from toolbatch import (
    FunctionResponsePart,
    JsonlRecorder,
    SchedulerConfig,
    ToolCall,
    ToolCallResponse,
    ToolScheduler,
    Turn,
    default_registry,
)
from toolbatch.producers import SandboxMode, ShellEnvMode, without_exit_line

__all__ = [
    "ToolbatchAgent",
    "ToolbatchEnvironment",
]

DEFAULT_BATCH_BUDGET_CHARS: Final = 8_000
"""Under the 10,000 characters at which ``mini.yaml``'s observation template cuts output."""
ABORT_WAIT_S: Final = 30.0
"""How long an interrupted command may take to stop (its group is sent SIGTERM, then SIGKILL)."""
_NO_OUTPUT: Final = "(no output)\n"
"""What the shell says in place of an empty output; mini-swe-agent expects ``""``."""


class ToolbatchEnvironmentConfig(LocalEnvironmentConfig):
    """``LocalEnvironmentConfig`` (``cwd``, ``env``, ``timeout``) and toolbatch's options.

    Attributes:
        batch_budget: characters of output sent per turn; ``None``: no budget.
        artifacts_dir: where complete output is kept; ``None``: the session's folder of the
            per-user state directory.
        sandbox: ``"workspace-write"``, ``"read-only"`` or ``"off"``.
        workspace_roots: where ``workspace-write`` commands may write; ``None``: ``cwd``
            (else the current directory).
        network: ``True`` lets the commands reach the network (default: off, as toolbatch's
            own default for ``workspace-write``).
        shell_env: ``"inherit"`` (minus secret-looking names), ``"minimal"`` or ``"none"``;
            ``env`` is set on top.
        settings: Claude Code settings files (hooks, permissions).
        record: a JSONL transcript path to record every turn in.
    """

    batch_budget: int | None = DEFAULT_BATCH_BUDGET_CHARS
    artifacts_dir: str | None = None
    sandbox: SandboxMode = "workspace-write"
    workspace_roots: list[str] | None = None
    network: bool = False
    shell_env: ShellEnvMode = "inherit"
    settings: tuple[str, ...] = ()
    record: str | None = None

    def scheduler_config(self) -> SchedulerConfig:
        """The ``SchedulerConfig`` these options make."""
        roots = self.workspace_roots or ([self.cwd] if self.cwd else None)
        return SchedulerConfig(
            batch_budget=self.batch_budget,
            artifacts_dir=self.artifacts_dir,
            sandbox=self.sandbox,
            workspace_roots=roots,
            network=self.network,
            shell_env=self.shell_env,
            shell_env_set=dict(self.env),
            settings=list(self.settings) or None,
            recorder=JsonlRecorder(self.record) if self.record else None,
        )


class _Session:
    """A ``ToolScheduler`` open on an event loop of its own, in a daemon thread."""

    def __init__(self, config: SchedulerConfig) -> None:
        self._config = config
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self.portal: BlockingPortal | None = None
        self.scheduler: ToolScheduler | None = None
        self._thread = threading.Thread(
            target=anyio.run, args=(self._main,), name="toolbatch-mini-swe-agent", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise self._failure

    async def _main(self) -> None:
        try:
            async with (
                BlockingPortal() as portal,
                ToolScheduler(default_registry(), self._config) as scheduler,
            ):
                self.portal, self.scheduler = portal, scheduler
                self._ready.set()
                await portal.sleep_until_stopped()
        except BaseException as exc:  # handed to the thread that opened the session
            self._failure = exc
            raise
        finally:
            self._ready.set()

    def run(self, calls: Sequence[ToolCall]) -> Turn:
        """Run ``calls`` as one turn; an exception while waiting aborts them first."""
        assert self.portal is not None
        assert self.scheduler is not None
        abort = self.portal.call(anyio.Event)
        future: Future[Turn] = self.portal.start_task_soon(_run_batch, self.scheduler, calls, abort)
        try:
            return future.result()
        except BaseException:
            self.portal.call(abort.set)
            future.result(timeout=ABORT_WAIT_S)  # every command stopped, the turn answered
            raise

    def close(self) -> None:
        portal = self.portal
        if portal is not None and self._thread.is_alive():
            portal.call(portal.stop)
        self._thread.join(ABORT_WAIT_S)


async def _run_batch(scheduler: ToolScheduler, calls: Sequence[ToolCall], abort: Any) -> Turn:
    return await scheduler.run_batch(calls, abort=abort)


def _output(response: ToolCallResponse) -> dict[str, Any]:
    """What mini-swe-agent reads of one command's result."""
    body: dict[str, Any] = {}
    for part in response.parts:
        if isinstance(part, FunctionResponsePart):
            body = part.function_response.response
            break
    text = body.get("output")
    text = text if isinstance(text, str) else ""
    returncode = response.returncode  # the shell's, as data: the text may say anything
    if returncode is not None:
        text = without_exit_line(text)
        if text == _NO_OUTPUT:
            text = ""
    if response.status == "success":
        return {
            "output": text,
            "returncode": -1 if returncode is None else returncode,
            "exception_info": "",
        }
    error = response.error or response.status
    return {
        "output": text,
        "returncode": -1,
        "exception_info": f"An error occurred while executing the command: {error}",
        "extra": {"exception_type": response.error_type or response.status, "exception": error},
    }


class ToolbatchEnvironment(LocalEnvironment):
    """A mini-swe-agent environment whose commands run through toolbatch's shell.

    Takes ``ToolbatchEnvironmentConfig``'s options as keyword arguments.
    """

    def __init__(self, *, config_class: type = ToolbatchEnvironmentConfig, **kwargs: Any) -> None:
        super().__init__(config_class=config_class, **kwargs)
        self.config: ToolbatchEnvironmentConfig
        self._session: _Session | None = None
        self._lock = threading.Lock()

    def _open(self) -> _Session:
        with self._lock:
            if self._session is None:
                self._session = _Session(self.config.scheduler_config())
                weakref.finalize(self, self._session.close)
            return self._session

    def execute(
        self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None
    ) -> dict[str, Any]:
        """Run ``action["command"]``; raises ``Submitted`` when the task is submitted."""
        [output] = self.execute_batch([action], cwd, timeout=timeout)
        return output

    def execute_batch(
        self, actions: Sequence[dict[str, Any]], cwd: str = "", *, timeout: int | None = None
    ) -> list[dict[str, Any]]:
        """Run the actions as one turn, concurrently, bounded together; outputs in order.

        Raises:
            Submitted: an action submitted the task (checked in order, after all ran).
        """
        directory = str(Path(cwd or self.config.cwd or Path.cwd()))
        calls = [
            ToolCall(
                id=str(action.get("tool_call_id") or f"action_{index}"),
                name="run_shell_command",
                args={
                    "command": str(action.get("command", "")),
                    "cwd": directory,
                    "timeout": timeout or self.config.timeout,
                },
            )
            for index, action in enumerate(actions)
        ]
        turn = self._open().run(calls)
        outputs = [_output(response) for response in turn.responses]
        for output in outputs:
            self._check_finished(output)
        return outputs

    def close(self) -> None:
        """Stop the scheduler and its event loop (a later command starts them again)."""
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            session.close()

    def __enter__(self) -> ToolbatchEnvironment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ToolbatchAgent(DefaultAgent):
    """``DefaultAgent`` that runs a response's actions as one toolbatch batch."""

    def execute_actions(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        actions = message.get("extra", {}).get("actions", [])
        if not isinstance(self.env, ToolbatchEnvironment):
            return super().execute_actions(message)
        outputs = self.env.execute_batch(actions)
        return self.add_messages(
            *self.model.format_observation_messages(message, outputs, self.get_template_vars())
        )
