"""One turn of tool calls that a framework runs one call at a time, completed once.

pydantic-ai and the OpenAI Agents SDK run each tool call themselves (concurrently) and only
later build the next model request from the calls' returns. :class:`SplitTurns` answers
the calls through ``ToolScheduler.execute`` (the producers bound their own output: the
shell's preview, MCP's, a Python tool's threshold). A batch that is every call of the model
response (when the framework says which those are, :meth:`SplitTurns.answer`) is completed
at once, and each caller gets its bounded text. Otherwise the responses are kept; at the
batch boundary, just before the next model request, :meth:`SplitTurns.complete` completes
every pending call of the last model response as one turn (``complete_turn``: the batch budget,
persist-once, PostToolBatch hooks, the send guard, the recorder). A framework that rebuilds
its request from the unbounded history every time keeps the completion and sends the same
bounded text again: a turn is completed once.

The calls a framework starts together (its tasks for one model response, started in the
same event-loop pass) are executed as one batch: the first to arrive waits one scheduling
pass for the others, then runs them all through one ``execute``, so the scheduler's
concurrency limit, its permission questions and its telemetry see the model's batch, and a
50-call response costs one scheduler pass instead of 50. A call that arrives later starts
the next batch.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeVar

import anyio
import anyio.lowlevel
from pydantic import ValidationError

from toolbatch import (
    FunctionResponsePart,
    Part,
    PendingTurn,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolScheduler,
    Turn,
)
from toolbatch._core import trusted_call
from toolbatch.providers import openai_chat

__all__ = [
    "Answer",
    "Completion",
    "SplitTurns",
    "in_own_task",
    "make_call",
    "response_text",
    "turn_texts",
]

_T = TypeVar("_T")

_JSON_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
"""The exact types of the argument values ``make_call`` takes as they are."""


async def in_own_task(work: Callable[[], Awaitable[_T]]) -> _T:
    """Await ``work()`` in a child task of an anyio task group, and return its result.

    Frameworks cancel their tool tasks with ``Task.cancel()``, and pydantic-ai does it twice
    (asyncio's ``gather`` cancels the tasks, then its ``cancel_and_drain`` cancels them
    again): a second native cancel landing in the shell's shielded cleanup cuts it short
    and leaves the command running. In a child task, every cancel of the framework's task
    becomes one cancellation of the task group's scope, which the cleanup's shield holds
    off, and the task group waits for the child to finish stopping its commands.
    """
    results: list[_T] = []

    async def run() -> None:
        results.append(await work())

    async with anyio.create_task_group() as group:
        group.start_soon(run)
    return results[0]


def make_call(call_id: str | None, name: str, args: object, ordinal: int = 0) -> ToolCall:
    """A ``ToolCall`` from a framework's raw values; unreadable arguments make it invalid.

    ``args`` is a JSON object string, a mapping or ``None``; anything else is answered by the
    scheduler with an ``invalid_args`` error in the call's place.
    """
    if isinstance(args, dict) and call_id and name:
        if type(args) is dict and all(
            type(value) in _JSON_SCALARS and type(key) is str for key, value in args.items()
        ):
            # The usual call (flat arguments, JSON values already): kept as it is; validating
            # it again would cost more than the rest of the call's way to the scheduler.
            return trusted_call(call_id, name, args, ordinal)
        try:  # nested values: validated all the way down
            return ToolCall.model_validate(
                {"id": call_id, "name": name, "args": args, "ordinal": ordinal}
            )
        except ValidationError:
            pass  # not JSON values: the mapping says why
    [call] = openai_chat.tool_calls(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }
            ],
        }
    )
    return call.model_copy(update={"ordinal": ordinal}) if ordinal else call


def turn_texts(source: Turn | Sequence[Part]) -> tuple[dict[str, str], str]:
    """The text each call's tool message carries, by call id, and the batch's own text.

    The mapping is ``toolbatch.providers.openai_chat``'s (output, then ``Error: ...``, then a
    reference to media a text-only tool message cannot hold; images it would send inline in
    a user message are not carried); the batch text is the turn's own text parts (hook
    context, the stop reason) joined by blank lines, ``""`` when there is none.
    """
    if not isinstance(source, Turn):
        return _mapped_texts(source), ""
    texts: dict[str, str] = {}
    for response in source.responses:
        text = _plain_output(response)
        if text is None:  # media or an error: the mapping's rules, for the whole turn
            texts = _mapped_texts(source)
            break
        texts[response.call_id] = text
    batch = [part.text for part in source.context_parts if isinstance(part, TextPart)]
    return texts, "\n\n".join(text for text in batch if text)


def _mapped_texts(source: Turn | Sequence[Part]) -> dict[str, str]:
    return {
        message["tool_call_id"]: message["content"]
        for message in openai_chat.tool_results(source)
        if message["role"] == "tool"
    }


def _plain_output(response: ToolCallResponse) -> str | None:
    """The usual response's text (one part, a string ``output`` alone, as the mapping
    sends it), or ``None`` when the mapping has more to say."""
    parts = response.parts
    if len(parts) == 1:
        part = parts[0]
        if type(part) is FunctionResponsePart:
            body = part.function_response.response
            output = body.get("output")
            if len(body) == 1 and type(output) is str:
                return output
    return None


def response_text(response: ToolCallResponse) -> str:
    """The text one response's tool message carries (``turn_texts`` for a lone response)."""
    text = _plain_output(response)
    if text is not None:
        return text
    return _mapped_texts(response.parts).get(response.call_id, "")


@dataclass(slots=True)
class Completion:
    """What one completed turn sends back, for the calls it was asked about.

    Attributes:
        texts: the bounded text of each call, by call id.
        context: the batch's own text (hook context, the stop reason), ``""`` if none.
        last_call_id: the call after whose result ``context`` belongs.
        stop_reason: why a hook stopped the agent after this turn, or ``None``.
    """

    texts: dict[str, str] = field(default_factory=dict)
    context: str = ""
    last_call_id: str | None = None
    stop_reason: str | None = None


@dataclass(slots=True, frozen=True)
class Answer:
    """What one call's caller receives.

    Attributes:
        text: the call's text: the bounded one when its turn was completed with its batch,
            else the text its producer bounded (until :meth:`SplitTurns.complete`).
        context: the turn's own text (hook context, the stop reason), on the last call of a
            turn completed with its batch; ``""`` on every other call.
    """

    text: str
    context: str = ""


_NOT_ANSWERED: Final = "Error: the call was not answered"


class _Waiting:
    """One call of a forming batch, and what its caller receives once the batch has run."""

    __slots__ = ("answer", "batch", "call", "failure", "lead", "response", "turn")

    def __init__(self, call: ToolCall, turn: Collection[str] | None, batch: _Forming) -> None:
        self.call = call
        self.turn = turn
        self.batch = batch
        self.lead = False
        self.response: ToolCallResponse | None = None
        self.answer: Answer | None = None
        self.failure: str | None = None

    @property
    def settled(self) -> bool:
        """Whether the call was answered, or failed with its batch."""
        return self.response is not None or self.answer is not None or self.failure is not None


class _Forming:
    """The calls of one batch, in arrival order, and the event its waiting callers share
    (one event per batch, not per call: a 50-call batch wakes 49 callers)."""

    __slots__ = ("changed", "members")

    def __init__(self, changed: anyio.Event) -> None:
        self.members: list[_Waiting] = []
        self.changed = changed
        """Set when the batch has run, or when its leader was cancelled before running it
        (then replaced by a new one, which the others wait on next)."""


class SplitTurns:
    """Calls executed as the batches the framework starts, completed as one turn at the batch
    boundary."""

    def __init__(self, scheduler: ToolScheduler) -> None:
        self.scheduler = scheduler
        self._pending: dict[str, tuple[ToolCallResponse, PendingTurn]] = {}
        """Each answered call's response and the batch it ran in, until it is completed."""
        self._forming: _Forming | None = None
        """The batch the calls arriving now join; the first of them runs it."""
        self._new_event: Callable[[], anyio.Event] | None = None
        """The running backend's own ``Event`` class, found at the first call (as the
        scheduler does): ``anyio.Event()`` looks the backend up each time."""

    async def run(self, call: ToolCall) -> str:
        """Answer one call (in the batch it arrived with); its response waits for
        :meth:`complete`.

        Returns the text the producer bounded (what the framework records in its history
        until the turn is completed and the batch budget replaces it). When the caller that
        ran the batch is cancelled, the batch is cancelled (its commands stopped), and the
        other calls of it are answered with that reason.
        """
        answer = await self.answer(call, turn=())  # no batch is a whole turn: all wait
        return answer.text

    async def answer(self, call: ToolCall, /, *, turn: Collection[str] | None) -> Answer:
        """Answer one call (in the batch it arrived with), completing its turn when it can.

        Args:
            call: the call.
            turn: the ids of every call of the model response that this object runs. A
                batch that is exactly those calls is run in that order and completed at
                once, as one turn (its texts are the bounded ones); another batch's
                responses wait for :meth:`complete`. ``None``: every batch is completed as
                it ran (nothing else would complete it).

        Cancellation is as for :meth:`run`.
        """
        batch = self._forming
        if batch is None:
            new_event = self._new_event
            if new_event is None:
                new_event = self._new_event = type(anyio.Event())
            batch = self._forming = _Forming(new_event())
        waiting = _Waiting(call, turn, batch)
        batch.members.append(waiting)
        if len(batch.members) == 1:
            waiting.lead = True  # the first call to arrive runs the batch
        while not (waiting.lead or waiting.settled):
            await batch.changed.wait()  # answered, or made the leader by a cancelled one
        if not waiting.settled:
            await self._run_batch(waiting)
        if waiting.answer is not None:
            return waiting.answer
        if waiting.response is None:
            return Answer(waiting.failure or _NOT_ANSWERED)
        return Answer(response_text(waiting.response))

    async def _run_batch(self, leader: _Waiting) -> None:
        forming = leader.batch
        try:
            await anyio.lowlevel.checkpoint()  # the calls started with this one arrive meanwhile
        except BaseException:
            forming.members.remove(leader)
            if not forming.members:
                self._forming = None
            else:  # another caller of this batch runs it; the rest wait on
                forming.members[0].lead = True
                woken, forming.changed = forming.changed, type(forming.changed)()
                woken.set()
            raise
        batch = forming.members
        self._forming = None  # the calls arriving from now on form the next batch
        calls = [waiting.call for waiting in batch]
        wanted = leader.turn
        whole = wanted is None
        if wanted is not None:
            ids = [call.id for call in calls]
            whole = _is_whole(ids, wanted)
            if whole and ids != list(wanted):  # run in the model's order
                order = {call_id: index for index, call_id in enumerate(wanted)}
                batch.sort(key=lambda waiting: order[waiting.call.id])
                calls = [waiting.call for waiting in batch]

        async def run() -> tuple[PendingTurn, Turn | None]:
            pending = await self.scheduler.execute(calls)
            return pending, (await self.scheduler.complete_turn(pending) if whole else None)

        failure = _NOT_ANSWERED
        try:
            pending, turn = await in_own_task(run)
            if turn is None:
                for waiting, response in zip(batch, pending, strict=True):
                    self._pending[waiting.call.id] = (response, pending)
                    waiting.response = response
            else:
                texts, context = turn_texts(turn)
                last = batch[-1]  # the turn's own text goes after its last result
                for waiting in batch:
                    text = texts.get(waiting.call.id, "")
                    waiting.answer = Answer(text, context if waiting is last else "")
        except anyio.get_cancelled_exc_class():
            failure = (
                "Error: the call was cancelled with the batch it ran in "
                "(the framework cancelled the task that ran the batch)"
            )
            raise
        except Exception as exc:
            failure = f"Error: the batch this call ran in failed: {exc}"
            raise
        finally:
            for waiting in batch:
                if waiting.response is None and waiting.answer is None:
                    waiting.failure = failure
            forming.changed.set()

    def is_pending(self, call_id: str) -> bool:
        """Whether ``call_id`` was answered and waits for its turn to be completed."""
        return call_id in self._pending

    async def complete(self, call_ids: Iterable[str]) -> Completion:
        """Complete the pending calls among ``call_ids`` (in the model's order) as one turn.

        Calls already completed, and calls this object never answered, are left out; when
        none is pending nothing runs and the completion is empty.
        """
        ids = [call_id for call_id in call_ids if call_id in self._pending]
        if not ids:
            return Completion()
        answered = [self._pending.pop(call_id) for call_id in ids]
        responses = [response for response, _ in answered]
        batch = answered[0][1]
        if len(batch) == len(responses) and all(map(operator.is_, batch, responses)):
            # the batch as it ran, in the model's order: its execution and completion are one turn
            turn = await self.scheduler.complete_turn(batch)
        else:
            turn = await self.scheduler.complete_turn(responses)
        texts, context = turn_texts(turn)
        return Completion(
            texts=texts,
            context=context,
            last_call_id=turn.responses[-1].call_id,
            stop_reason=turn.stop_reason,
        )


def _is_whole(ids: Sequence[str], turn: Collection[str]) -> bool:
    """Whether the batch of calls ``ids`` is exactly the calls of ``turn``, each once."""
    if len(ids) != len(turn):
        return False
    unique = set(ids)
    return len(unique) == len(ids) and unique.issuperset(turn)
