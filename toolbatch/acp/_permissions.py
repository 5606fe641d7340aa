"""The permission questions of an ACP session: ``session/request_permission``, one at a
time per session, and what "always allow" remembers for the rest of the session."""

from __future__ import annotations

from typing import Final

import anyio
import structlog
from acp import Client
from acp.schema import AllowedOutcome, PermissionOption

from toolbatch._core import ToolCall, ToolDeclaration
from toolbatch.acp._session import _Session
from toolbatch.acp._updates import command_prefixes, permission_tool_call
from toolbatch.permissions import SHELL_TOOL, PermissionRule, Permissions
from toolbatch.scheduler import DEFAULT_CALL_TIMEOUT_CEILING_S, approval_reason

__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "REJECT_ONCE",
    "ask_permission",
]

log = structlog.get_logger("toolbatch.acp")

ALLOW_ONCE: Final = "allow_once"
ALLOW_ALWAYS: Final = "allow_always"
REJECT_ONCE: Final = "reject_once"


async def ask_permission(
    session: _Session,
    client: Client,
    tool_call_id: str,
    call: ToolCall,
    declaration: ToolDeclaration,
) -> bool:
    """Ask the user whether ``call`` may run (one question at a time per session).

    The question names what asked (a permission rule or a hook: ``approval_reason``);
    "always allow" remembers the command's prefix for the shell (Claude Code's "don't
    ask again for `git status` commands"), the tool for any other tool.

    Raises:
        TimeoutError: the client did not answer within the call's ceiling (``--timeout``).
    """
    reason = approval_reason()
    prefixes = command_prefixes(call) if declaration.name == SHELL_TOOL else []
    # Unanswered, the question would hold the call (and the prompt) past any deadline:
    # it gets the call's ceiling (--timeout), its wait for an earlier question included.
    limit = (
        session.loop.scheduler.config.call_timeout
        if session.loop is not None
        else DEFAULT_CALL_TIMEOUT_CEILING_S
    )
    with anyio.move_on_after(limit) as waited:
        async with session.permission_lock:
            if _remembered(session, call, declaration):
                return True
            await session.flush()  # the client knows the call before it is asked about it
            always = (
                f"Always allow {call.name} in this session"
                if not prefixes
                else "Always allow "
                + ", ".join(f"`{prefix}`" for prefix in prefixes)
                + " commands in this session"
            )
            options = [
                PermissionOption(option_id=ALLOW_ONCE, name="Allow", kind="allow_once"),
                PermissionOption(option_id=ALLOW_ALWAYS, name=always, kind="allow_always"),
                PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once"),
            ]
            if declaration.name == SHELL_TOOL and not prefixes:
                # Not a plain sequence of simple commands: nothing safe to remember.
                del options[1]
            response = await client.request_permission(
                session_id=session.id,
                tool_call=permission_tool_call(tool_call_id, call, reason=reason),
                options=options,
            )
            outcome = response.outcome
            option = outcome.option_id if isinstance(outcome, AllowedOutcome) else None
            allowed = option in (ALLOW_ONCE, ALLOW_ALWAYS)
            if option == ALLOW_ALWAYS:
                if prefixes:
                    session.allowed_commands.extend(
                        PermissionRule.parse(
                            f"Bash({prefix} *)",
                            "allow",
                            source="'always allow' in this session",
                        )
                        for prefix in prefixes
                    )
                elif declaration.name != SHELL_TOOL:
                    session.always_allowed.add(declaration.name)
    if waited.cancelled_caught:
        log.warning("acp.permission_unanswered", session=session.id, call_id=call.id)
        raise TimeoutError(
            f"the client did not answer the permission request within {limit:g} s "
            f"(the call timeout, --timeout), so {call.name!r} was not run"
        )
    log.info("acp.permission", session=session.id, call_id=call.id, allowed=allowed, reason=reason)
    return allowed


def _remembered(session: _Session, call: ToolCall, declaration: ToolDeclaration) -> bool:
    """Whether the user already allowed this call for the session."""
    if declaration.name != SHELL_TOOL:
        return declaration.name in session.always_allowed
    if not session.allowed_commands:
        return False
    remembered = Permissions(allow=tuple(session.allowed_commands))
    return remembered.decide(call.name, call.args).behavior == "allow"
