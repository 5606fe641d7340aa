"""The shared finalizer: named scenarios with a real artifact store on a real disk."""

from __future__ import annotations

import copy
import math
import os
import pickle
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
import structlog

from tests.finalize._support import (
    RecordingStore,
    budgeted_length,
    output_of,
    response,
)
from tests.providers._samples import b64, png
from toolbatch import (
    ArtifactStore,
    ConfigError,
    FileData,
    FileDataPart,
    FunctionResponse,
    FunctionResponsePart,
    InlineData,
    InlineDataPart,
    Part,
    TextPart,
    ToolCall,
    ToolCallResponse,
)
from toolbatch.finalize import (
    TRUNCATION_HEADER,
    HookText,
    finalize_tool_responses,
    finalize_turn,
    response_text_length,
)

SHELL_OUTPUT_CHARS = 7_048


def shell_text(seed: int) -> str:
    lines = "".join(f"[{seed}] build step {i:04d}: ok\n" for i in range(400))
    return (lines + f"exit code: {seed}\n").rjust(SHELL_OUTPUT_CHARS, "=")[-SHELL_OUTPUT_CHARS:]


def files_in(directory: Path) -> set[str]:
    return {entry.name for entry in directory.iterdir()} if directory.exists() else set()


async def test_two_persisted_shell_results_share_the_budget_without_new_files(
    tmp_path: Path,
) -> None:
    """14,096 characters of producer-persisted shell output fit 10,000; nothing new is written."""
    store = ArtifactStore(tmp_path / "artifacts")
    texts = [shell_text(1), shell_text(2)]
    producer_paths = [
        await store.persist(f"call-{i}", "run_shell_command", text) for i, text in enumerate(texts)
    ]
    batch = [
        response(f"call-{i}", text, files=(path,))
        for i, (text, path) in enumerate(zip(texts, producer_paths, strict=True))
    ]
    before = files_in(store.root)

    finalized = await finalize_tool_responses(batch, budget=10_000, store=store)

    assert sum(item.content_length for item in finalized) <= 10_000
    assert budgeted_length(finalized) <= 10_000
    assert files_in(store.root) == before
    assert store.written == tuple(producer_paths)
    for item, path, text in zip(finalized, producer_paths, texts, strict=True):
        output = output_of(item)
        assert output.startswith(f"{TRUNCATION_HEADER}\nFull output: {path}\n\n")
        assert output.endswith(text[-3_000:])  # the exit code at the end stays visible
        assert item.persisted_output_files == (path,)
        assert item.content_length == len(output)


async def test_cut_undecided_responses_are_persisted_once_in_full(tmp_path: Path) -> None:
    """A cut response without a decision is written whole, and its preview names the file."""
    store = ArtifactStore(tmp_path)
    big = "".join(f"row {i}\n" for i in range(5_000))
    batch = [response("a", big), response("b", "small output")]

    finalized = await finalize_tool_responses(batch, budget=2_000, store=store)

    [path] = store.written
    assert path.read_text(encoding="utf-8") == big
    assert finalized[0].persisted_output_files == (path,)
    assert f"Full output: {path}" in output_of(finalized[0])
    assert finalized[1] is batch[1]
    assert finalized[1].persisted_output_files is None
    assert budgeted_length(finalized) <= 2_000


@pytest.mark.parametrize(
    "budget",
    [
        pytest.param(None, id="none"),
        pytest.param(0, id="zero"),
        pytest.param(-1, id="minus-one"),
        pytest.param(math.inf, id="infinite"),
        pytest.param(-math.inf, id="minus-infinite"),
        pytest.param(-0.5, id="negative-float"),
    ],
)
async def test_a_disabled_budget_returns_the_same_list_without_io(
    tmp_path: Path, budget: float | None
) -> None:
    """Disabled: the very list and objects come back and nothing touches the disk."""
    store = RecordingStore(tmp_path / "never")
    batch = [response(f"c{i}", "x" * 50_000) for i in range(3)]
    finalized = await finalize_tool_responses(batch, budget=budget, store=store)
    assert finalized is batch
    assert store.calls == []
    assert files_in(store.root) == set()


async def test_a_batch_that_fits_is_returned_unchanged(tmp_path: Path) -> None:
    """Exactly at the budget nothing changes: same list, same responses, no I/O."""
    store = RecordingStore(tmp_path)
    batch = [response("a", "x" * 600), response("b", "y" * 400)]
    assert await finalize_tool_responses(batch, budget=1_000, store=store) is batch
    assert store.calls == []


async def test_a_tuple_batch_comes_back_as_a_list_of_the_same_responses() -> None:
    """Any sequence is accepted; when nothing changes its responses are returned as they are."""
    batch = (response("a", "x"), response("b", "y"))
    finalized = await finalize_tool_responses(batch, budget=10)
    assert isinstance(finalized, list)
    assert all(new is old for new, old in zip(finalized, batch, strict=True))


@pytest.mark.parametrize(
    ("budget", "shown"),
    [
        pytest.param("1000", "'1000'", id="str"),
        pytest.param(True, "True", id="bool"),
        pytest.param(math.nan, "nan", id="nan"),
        pytest.param([1], "[1]", id="list"),
        pytest.param(0.5, "0.5", id="fraction"),
        pytest.param(1000.0, "1000.0", id="whole-float"),
    ],
)
async def test_a_bad_budget_is_a_config_error_naming_it(budget: object, shown: str) -> None:
    """A str, bool, NaN or fractional budget is refused, naming the value and the fix."""
    with pytest.raises(ConfigError, match="budget") as caught:
        await finalize_tool_responses([response("a", "x")], budget=budget)  # type: ignore[arg-type]
    assert shown in str(caught.value)
    assert "None for no budget" in str(caught.value)


@pytest.mark.parametrize("value", [0, -3, True, 2.5])
async def test_a_bad_persist_concurrency_is_a_config_error(value: object) -> None:
    """persist_concurrency must be an int >= 1."""
    with pytest.raises(ConfigError, match=f"persist_concurrency.*{value!r}"):
        await finalize_tool_responses(
            [response("a", "x")],
            budget=10,
            persist_concurrency=value,  # type: ignore[arg-type]
        )


async def test_without_a_store_a_cut_response_is_decided_with_no_file() -> None:
    """store=None: the batch fits, undecided cut responses become (), decided ones keep paths."""
    producer = (Path("/artifacts/kept.output"),)
    batch = [response("a", "a" * 9_000), response("b", "b" * 9_000, files=producer)]
    finalized = await finalize_tool_responses(batch, budget=1_000)
    assert finalized[0].persisted_output_files == ()
    assert finalized[1].persisted_output_files == producer
    assert "Full output" not in output_of(finalized[0])
    assert "Full output: /artifacts/kept.output" in output_of(finalized[1])
    assert budgeted_length(finalized) <= 1_000


def unwritable_store(tmp_path: Path) -> ArtifactStore:
    """A real store whose primary and fallback directories both sit under a regular file."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the directories should be")
    return ArtifactStore(blocker / "primary", fallback_dir=blocker / "fallback")


async def test_a_failing_store_still_yields_a_batch_within_budget(tmp_path: Path) -> None:
    """Both directories unwritable: (), a warning event, and the cap still holds."""
    store = unwritable_store(tmp_path)
    batch = [response("a", "a" * 20_000), response("b", "b" * 20_000)]
    with structlog.testing.capture_logs() as events:
        finalized = await finalize_tool_responses(batch, budget=3_000, store=store)
    assert [item.persisted_output_files for item in finalized] == [(), ()]
    assert budgeted_length(finalized) <= 3_000
    failures = [e for e in events if e["event"] == "finalize.persist_failed"]
    assert {e["call_id"] for e in failures} == {"a", "b"}
    assert all(e["error_type"] == "ArtifactWriteError" for e in failures)
    assert all("Full output" not in output_of(item) for item in finalized)


async def test_a_store_over_its_cap_still_yields_a_batch_within_budget(tmp_path: Path) -> None:
    """A per-file cap refusal is a failed persistence like any other."""
    store = ArtifactStore(tmp_path, max_file_bytes=1_000)
    finalized = await finalize_tool_responses([response("a", "a" * 5_000)], budget=500, store=store)
    assert finalized[0].persisted_output_files == ()
    assert len(output_of(finalized[0])) <= 500
    assert store.written == ()


async def test_a_full_disk_still_yields_a_batch_within_budget(small_fs: Path) -> None:
    """ENOSPC from a real 1 MiB tmpfs on both directories: the cap holds."""
    store = ArtifactStore(small_fs / "primary", fallback_dir=small_fs / "fallback")
    batch = [response(f"c{i}", chr(0x4E00 + i) * 400_000) for i in range(3)]
    finalized = await finalize_tool_responses(batch, budget=6_000, store=store)
    assert budgeted_length(finalized) <= 6_000
    decisions = [item.persisted_output_files for item in finalized]
    assert () in decisions  # 3 x 1.2 MB of UTF-8 cannot all fit in 1 MiB
    for item, decision in zip(finalized, decisions, strict=True):
        assert decision is not None
        for path in decision:
            assert path.read_text(encoding="utf-8") == chr(0x4E00 + finalized.index(item)) * 400_000


class ThrowingStore(ArtifactStore):
    """A store with a bug: persist raises something no store should."""

    async def persist(self, call_id: str, tool_name: str, text: str) -> Path:
        raise RuntimeError(f"bug while persisting {call_id!r}")


async def test_a_throwing_store_still_yields_a_batch_within_budget(tmp_path: Path) -> None:
    """An unexpected exception from the store is logged, never raised; the cap holds."""
    batch = [response("a", "a" * 20_000), response("b", "b" * 100)]
    with structlog.testing.capture_logs() as events:
        finalized = await finalize_tool_responses(
            batch, budget=1_000, store=ThrowingStore(tmp_path)
        )
    assert finalized[0].persisted_output_files == ()
    assert budgeted_length(finalized) <= 1_000
    [failure] = [e for e in events if e["event"] == "finalize.persist_failed"]
    assert failure["error_type"] == "RuntimeError"


class BlockingStore(ArtifactStore):
    """A store whose writes never finish, so a cancellation lands inside persistence."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.started = anyio.Event()

    async def persist(self, call_id: str, tool_name: str, text: str) -> Path:
        self.started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_cancellation_during_persistence_propagates(tmp_path: Path) -> None:
    """The finalizer never swallows cancellation while it waits for the store."""
    store = BlockingStore(tmp_path)
    batch = [response("a", "a" * 20_000)]
    finished = False
    async with anyio.create_task_group() as group:

        async def finalize() -> None:
            nonlocal finished
            await finalize_tool_responses(batch, budget=1_000, store=store)
            finished = True

        group.start_soon(finalize)
        await store.started.wait()
        group.cancel_scope.cancel()
    assert not finished


@pytest.mark.parametrize(
    "call_ids",
    [
        pytest.param(["call", "call", "call-1"], id="duplicate-and-reserved"),
        pytest.param(["dir/call", "dir_call", "call"], id="colliding-when-made-safe"),
        pytest.param(["", "", ".."], id="empty-and-dots"),
    ],
)
async def test_duplicate_and_colliding_call_ids_persist_to_distinct_files(
    tmp_path: Path, call_ids: list[str]
) -> None:
    """Identical content under repeated or colliding ids still lands in one file per response."""
    store = ArtifactStore(tmp_path)
    same_text = "identical output\n" * 2_000
    batch = [response(call_id, same_text) for call_id in call_ids]

    finalized = await finalize_tool_responses(batch, budget=3_000, store=store)

    paths = [item.persisted_output_files for item in finalized]
    assert all(files is not None and len(files) == 1 for files in paths)
    flat = [files[0] for files in paths if files]
    assert len(set(flat)) == len(batch)
    assert len(files_in(tmp_path)) == len(batch)
    for path in flat:
        assert path.parent == tmp_path
        assert path.read_text(encoding="utf-8") == same_text
    for item, path in zip(finalized, flat, strict=True):
        assert f"Full output: {path}" in output_of(item)


async def test_media_other_keys_and_part_order_are_preserved() -> None:
    """Only cut responses change; media stays the same object; a structured value and other
    keys that fit stay as they are, while a cut response folds its other keys into output."""
    image = InlineDataPart(inline_data=InlineData(mime_type="image/png", data=b64(png())))
    document = FileDataPart(file_data=FileData(mime_type="application/pdf", file_uri="gs://b/d"))
    structured = FunctionResponsePart(
        function_response=FunctionResponse(
            id="c", name="t", response={"output": {"rows": [1, 2]}, "meta": "kept"}
        )
    )
    main = FunctionResponsePart(
        function_response=FunctionResponse(
            id="c", name="t", response={"output": "o" * 5_000, "error": "e" * 5_000, "code": 7}
        )
    )
    parts: list[Part] = [main, image, TextPart(text="t" * 5_000), structured, document]
    batch = [ToolCallResponse(call_id="c", name="t", parts=parts)]

    [item] = await finalize_tool_responses(batch, budget=900)

    assert [type(p) for p in item.parts] == [type(p) for p in parts]
    assert item.parts[1] is image
    assert item.parts[3] is structured
    assert item.parts[4] is document
    new_main = item.parts[0]
    assert isinstance(new_main, FunctionResponsePart)
    body = new_main.function_response.response
    assert set(body) == {"output", "error"}
    assert str(body["output"]).endswith('\n{"code":7}')  # folded in, kept in the tail
    assert new_main.function_response.id == "c"
    assert all(isinstance(body[k], str) and len(body[k]) <= 300 for k in ("output", "error"))
    assert item.content_length == response_text_length(item.parts) <= 900
    assert main.function_response.response["output"] == "o" * 5_000  # the input is untouched


async def test_refinalizing_with_a_smaller_budget_shrinks_without_nesting_or_writing(
    tmp_path: Path,
) -> None:
    """Same or larger budget: nothing changes. Smaller: shorter previews, one header, no write."""
    store = RecordingStore(tmp_path)
    text = "".join(f"line {i}\n" for i in range(20_000))
    batch = [response("a", text), response("b", text[::-1])]
    first = await finalize_tool_responses(batch, budget=8_000, store=store)
    assert len(store.calls) == 2

    assert await finalize_tool_responses(first, budget=8_000, store=store) is first
    assert await finalize_tool_responses(first, budget=50_000, store=store) is first

    second = await finalize_tool_responses(first, budget=2_000, store=store)
    assert len(store.calls) == 2
    assert budgeted_length(second) <= 2_000
    for old, new in zip(first, second, strict=True):
        assert new.persisted_output_files == old.persisted_output_files
        output = output_of(new)
        assert output.count(TRUNCATION_HEADER) == 1
        assert output.count("Full output:") == 1
        assert "characters omitted" in output
        assert output.count("characters omitted") == 1

    # The shrunken preview is what a fresh pass at 2,000 would show (same paths).
    direct = await finalize_tool_responses(
        [
            item.model_copy(update={"persisted_output_files": first[i].persisted_output_files})
            for i, item in enumerate(batch)
        ],
        budget=2_000,
    )
    assert [output_of(item) for item in second] == [output_of(item) for item in direct]


async def test_a_hook_rewrite_of_a_preview_is_budgeted_as_new_text() -> None:
    """State only applies to text that is still exactly the preview; edited text is fresh."""
    [first] = await finalize_tool_responses([response("a", "x" * 10_000)], budget=1_000)
    edited_part = FunctionResponsePart(
        function_response=FunctionResponse(
            id="a", name="run_shell_command", response={"output": output_of(first) + "\nhook"}
        )
    )
    edited = first.with_parts([edited_part])
    [again] = await finalize_tool_responses([edited], budget=500)
    assert len(output_of(again)) <= 500
    assert again.persisted_output_files == ()


async def test_content_length_is_recomputed_from_the_returned_parts() -> None:
    """Every returned response measures exactly what its parts hold."""
    batch = [
        response("a", "中" * 3_000),
        response("b", "😀" * 3_000),
        ToolCallResponse(call_id="c", name="t", parts=[TextPart(text="t" * 3_000)]),
    ]
    finalized = await finalize_tool_responses(batch, budget=1_500)
    for item in finalized:
        assert item.content_length == response_text_length(item.parts)
    assert sum(item.content_length for item in finalized) <= 1_500


async def test_persistence_runs_with_bounded_concurrency(tmp_path: Path) -> None:
    """At most persist_concurrency files are being written at once (a file that only waits
    for its directory fsync has freed its slot), and all of them complete."""
    in_flight = 0
    peak = 0
    counting = threading.Lock()

    class CountingStore(ArtifactStore):
        def sync_file(self, fd: int) -> None:  # in the worker thread writing the file
            nonlocal in_flight, peak
            with counting:
                in_flight += 1
                peak = max(peak, in_flight)
            try:
                time.sleep(0.05)
                super().sync_file(fd)
            finally:
                with counting:
                    in_flight -= 1

    store = CountingStore(tmp_path)
    batch = [response(f"c{i}", f"{i}" * 10_000) for i in range(12)]
    finalized = await finalize_tool_responses(
        batch, budget=1_200, store=store, persist_concurrency=3
    )
    assert 1 < peak <= 3
    assert len(store.written) == 12
    assert all(item.persisted_output_files for item in finalized)
    assert len(set(os.listdir(tmp_path))) == 12


def test_toolcall_ids_are_echoed_unchanged() -> None:
    """The function response id and name are never rewritten by the finalizer."""
    call = ToolCall(id="weird/../id", name="t")
    batch = [ToolCallResponse.failed(call, "e" * 10_000)]
    [item] = anyio.run(lambda: finalize_tool_responses(batch, budget=100))
    part = item.parts[0]
    assert isinstance(part, FunctionResponsePart)
    assert part.function_response.id == "weird/../id"
    assert item.persisted_output_files == ()


@pytest.mark.parametrize(
    "made",
    [
        pytest.param(lambda: response("a", "q" * 10_000), id="output"),
        pytest.param(
            lambda: ToolCallResponse.failed(ToolCall(id="a", name="t"), "e" * 10_000),
            id="error",
        ),
    ],
)
async def test_a_cut_response_is_a_model_like_any_other(
    made: Callable[[], ToolCallResponse],
) -> None:
    """Equal, dumped, copied and pickled alike: a cut response and its validated twin
    (an output cut in one call, an error through the general edit of its parts)."""
    [item] = await finalize_tool_responses([made()], budget=500)
    assert item.content_length <= 500
    twin = ToolCallResponse.model_validate(item.model_dump())
    assert twin.parts == item.parts
    assert twin.model_dump() == item.model_dump()
    assert twin.model_dump_json() == item.model_dump_json()
    assert item.model_copy() == item
    assert copy.deepcopy(item) == item
    assert pickle.loads(pickle.dumps(item)) == item
    renamed = item.model_copy(update={"name": "other"})
    assert (renamed.name, renamed.parts) == ("other", item.parts)


async def test_a_pass_that_keeps_the_turn_reports_its_measured_length() -> None:
    """A turn within its budget comes back with the length it was measured at (what the
    send guard would measure), and a turn that had to be cut without one."""
    batch = [response("a", "x" * 300), response("b", "y" * 200)]
    kept = await finalize_turn(batch, [HookText("note")], budget=1_000)
    assert kept.responses == batch
    assert kept.length == 300 + 200 + len("note")
    cut = await finalize_turn(batch, [], budget=100)
    assert cut.length is None
    assert sum(item.content_length for item in cut.responses) <= 100
