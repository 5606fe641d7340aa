"""Hook text: the turn's own text, a slot kind beside the responses under the one budget."""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.finalize._support import RecordingStore, budgeted_length, output_of, response
from tests.strategies import scaled
from toolbatch.finalize import (
    TRUNCATION_HEADER,
    FinalizedTurn,
    HookText,
    finalize_tool_responses,
    finalize_turn,
)

HOOK_SETTINGS = settings(
    max_examples=scaled(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def finalize(
    outputs: list[str], hooks: list[HookText], budget: int, store: RecordingStore | None = None
) -> FinalizedTurn:
    batch = [response(f"c{i}", text) for i, text in enumerate(outputs)]
    return anyio.run(lambda: finalize_turn(batch, hooks, budget=budget, store=store))


def turn_length(turn: FinalizedTurn) -> int:
    return budgeted_length(turn.responses) + sum(len(hook.text) for hook in turn.hook_text)


texts = st.text(alphabet="ab\n", max_size=4_000)


@HOOK_SETTINGS
@given(
    outputs=st.lists(texts, max_size=6),
    hooks=st.lists(texts, min_size=1, max_size=4),
    data=st.data(),
)
def test_hook_text_shares_the_budget_and_is_saved_once(
    outputs: list[str], hooks: list[str], data: st.DataObject
) -> None:
    """Responses and hook text together fit; each cut text has one header and its file holds
    the whole text; another pass changes nothing, a smaller budget re-cuts it from what it
    kept, and no text is ever written twice."""
    total = sum(map(len, outputs)) + sum(map(len, hooks))
    budget = data.draw(st.integers(1, total + 10), label="budget")
    with tempfile.TemporaryDirectory() as directory:
        store = RecordingStore(Path(directory))
        turn = finalize(outputs, [HookText(text) for text in hooks], budget, store)
        assert len(turn.responses) == len(outputs)
        assert len(turn.hook_text) == len(hooks)
        assert turn_length(turn) <= budget
        for hook, original in zip(turn.hook_text, hooks, strict=True):
            if hook.text == original:
                assert hook.persisted_output_files is None  # not cut: nothing decided
                continue
            assert hook.text.count(TRUNCATION_HEADER) <= 1
            [path] = hook.persisted_output_files or (None,)
            assert path is not None
            assert path.name.startswith("hook-text-")
            assert path.read_text(encoding="utf-8") == original
        writes = len(store.calls)
        assert writes <= len(outputs) + len(hooks)
        again = anyio.run(
            lambda: finalize_turn(turn.responses, turn.hook_text, budget=budget, store=store)
        )
        assert again.hook_text == turn.hook_text
        assert len(store.calls) == writes
        smaller = max(1, budget // 3)
        shrunk = anyio.run(
            lambda: finalize_turn(turn.responses, turn.hook_text, budget=smaller, store=store)
        )
        assert turn_length(shrunk) <= smaller
        for hook, before in zip(shrunk.hook_text, turn.hook_text, strict=True):
            assert hook.text.count(TRUNCATION_HEADER) <= 1
            if before.persisted_output_files is not None:
                assert hook.persisted_output_files == before.persisted_output_files
        # Only what the first pass left undecided is written, each once.
        hook_writes = [call_id for call_id, tool, _ in store.calls if tool == "hook-text"]
        assert len(hook_writes) == len(set(hook_writes))


def test_hook_text_is_never_a_response(tmp_path: Path) -> None:
    """A 30,000-character context beside two small outputs: the outputs stay whole, the
    context is cut with its own file, and the responses are exactly the calls'."""
    context = "".join(f"lint {i}: unused import\n" for i in range(1_500))
    store = RecordingStore(tmp_path)
    turn = finalize(["hello", "world"], [HookText(context)], 2_000, store)
    assert [r.call_id for r in turn.responses] == ["c0", "c1"]
    assert [output_of(r) for r in turn.responses] == ["hello", "world"]
    [hook] = turn.hook_text
    assert hook.text.startswith(f"{TRUNCATION_HEADER}\nFull output: ")
    assert len(hook.text) <= 2_000 - len("helloworld")
    assert [(call_id, tool) for call_id, tool, _ in store.calls] == [("1", "hook-text")]
    assert hook.part().text == hook.text


def test_without_hook_text_the_finalizer_is_the_responses_finalizer() -> None:
    """finalize_tool_responses is finalize_turn with no hook text: the same responses."""
    batch = [response("a", "x" * 5_000), response("b", "y" * 50)]
    alone = anyio.run(lambda: finalize_tool_responses(batch, budget=1_000))
    turn = anyio.run(lambda: finalize_turn(batch, [], budget=1_000))
    assert turn.responses == alone
    assert turn.hook_text == []
