"""The chaos campaign: its checkers catch what they are for, and a short campaign holds.

Every violation counter of ``bench._chaos_run.VIOLATIONS`` is shown a deliberately broken
input here (a checker that cannot fail is a defect); then a short campaign with a fixed
seed runs against the real scheduler, shell, MCP test server, hooks and failing store: 22
cheap batches of the first 500 that together inject every fault kind those 500 inject (80
kinds in 85 calls, where the first 50 batches inject 71 kinds in 245 calls), and the cheap
batches that once failed (``REGRESSIONS``).
"""

from __future__ import annotations

import base64
import errno
import importlib.util
import os
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

import toolbatch.artifacts._deadline
from bench import _chaos_checks as checks
from bench._chaos_boundaries import BOUNDARY_KINDS, run_boundaries
from bench._chaos_faults import (
    VICTIM_BYTES,
    ChaosStore,
    SmallDisk,
    build_registry,
    eacces_is_real,
    plant_symlinks,
)
from bench._chaos_plan import (
    ArtifactSpec,
    BatchPlan,
    CallSpec,
    covering_batches,
    fault_kinds,
    mcp_big_text,
    plan_batch,
    plan_digest,
    shell_yes_bytes,
    shell_yes_command,
)
from bench._chaos_run import (
    TEST_SERVER,
    VIOLATIONS,
    CampaignOptions,
    CampaignReport,
    _LogProbe,
    run_campaign,
)
from bench.chaos import format_report, main
from toolbatch import (
    FunctionResponse,
    FunctionResponsePart,
    JsonlRecorder,
    SchedulerConfig,
    TextPart,
    ToolCall,
    ToolCallResponse,
    ToolScheduler,
    Turn,
    load_session,
)
from toolbatch.hooks import PostToolBatchInput, PostToolBatchOutput

CI_SEED = 24
CI_SEARCH = 500
"""The CI campaign runs the batches of the first 500 that cover every fault kind."""
REGRESSIONS = (135,)
"""Batches of seed 24 that failed once, run again by the CI campaign. Batch 121 (42 s of a
hanging disk by design) runs as its scenario instead: see the regression tests below."""
ROOT = Path(__file__).resolve().parents[1]
ELSEWHERE = {
    # 11 s of CPU in the campaign, for scenarios the suite already runs as they are.
    "boundary.non_reading_client": (
        "tests/service/test_limits.py::"
        "test_a_client_that_never_reads_30000_small_answers_stops_being_read",
        "tests/acp/test_limits.py::test_a_client_that_never_reads_30000_answers_stops_being_read",
    ),
}
"""Boundary faults the CI campaign leaves to the tests that run the same scenario."""

# The campaign runs in the first test's setup: half a minute alone, longer beside the rest
# of the suite (slow and hanging disks, hung servers and hooks are its point).
pytestmark = pytest.mark.timeout(600)


def _response(call_id: str, name: str = "t", output: str = "out", **extra: Any) -> ToolCallResponse:
    part = FunctionResponsePart(
        function_response=FunctionResponse(id=call_id, name=name, response={"output": output})
    )
    return ToolCallResponse(call_id=call_id, name=name, parts=[part], **extra)


def _spec(call_id: str, name: str = "t", expect: Any = "run", position: int = 0) -> CallSpec:
    raw = {"id": call_id, "name": name, "args": {}}
    return CallSpec(
        kind="test", raw=raw, id=call_id, name=name, expect=expect, sort_key=(position, position)
    )


# -- plans ------------------------------------------------------------------------------


def test_a_seed_gives_the_same_plans_and_another_seed_others() -> None:
    """Plans depend on the seed and the batch number only."""
    first = [plan_batch(7, index) for index in range(40)]
    again = [plan_batch(7, index) for index in range(40)]
    other = [plan_batch(8, index) for index in range(40)]
    assert plan_digest(first) == plan_digest(again)
    assert plan_digest(first) != plan_digest(other)
    assert sum((plan.faults for plan in first), Counter()) == sum(
        (plan.faults for plan in again), Counter()
    )


def test_the_covering_batches_inject_every_kind_of_the_batches_searched() -> None:
    """Few batches, every fault kind of the search; a search of nothing is refused."""
    covering = covering_batches(CI_SEED, search=CI_SEARCH)
    searched = set().union(*(fault_kinds(plan_batch(CI_SEED, i)) for i in range(CI_SEARCH)))
    covered = set().union(*(fault_kinds(plan_batch(CI_SEED, i)) for i in covering))
    assert covered == searched
    assert len(searched) >= 80
    assert len(covering) <= 30
    assert list(covering) == sorted(set(covering))
    assert covering_batches(CI_SEED, search=1) == (0,)
    with pytest.raises(ValueError, match="search must be at least 1 batch, got 0"):
        covering_batches(CI_SEED, search=0)


def test_boundary_faults_left_out_of_the_ci_campaign_run_in_their_own_tests() -> None:
    """Each boundary fault the CI campaign skips is a test of the suite (the same scenario)."""
    for kind, tests in ELSEWHERE.items():
        assert kind in BOUNDARY_KINDS
        for test in tests:
            path, name = test.split("::")
            assert f"def {name}(" in (ROOT / path).read_text(), test


async def test_an_unknown_boundary_fault_to_skip_is_refused(tmp_path: Path) -> None:
    """A misspelt boundary fault is named, with the ones there are."""
    with pytest.raises(ValueError, match=r"unknown boundary faults \['boundary\.nope'\]"):
        await run_boundaries(tmp_path, "CHAOS_RUN=x", skip=frozenset({"boundary.nope"}))


def test_expected_order_follows_ordinals_then_positions() -> None:
    """Shuffled batches expect responses in ordinal order; duplicates are marked as such."""
    plans = [plan_batch(3, index) for index in range(200)]
    shuffled = next(plan for plan in plans if plan.shuffled and len(plan.calls) > 3)
    keys = [spec.sort_key for spec in shuffled.expected_order]
    assert keys == sorted(keys)
    duplicated = next(plan for plan in plans if any(c.expect == "duplicate" for c in plan.calls))
    first_ids = [c.id for c in duplicated.calls if c.expect != "duplicate"]
    assert all(c.id in first_ids for c in duplicated.calls if c.expect == "duplicate"), (
        "a duplicate repeats an earlier id"
    )


def test_shell_output_is_known_to_the_byte() -> None:
    """The planned command prints exactly the bytes the symlink names are computed from."""
    command = shell_yes_command("sTbTcT", 70_001)
    printed = subprocess.run(["bash", "-c", command], capture_output=True, check=True).stdout
    assert printed == shell_yes_bytes("sTbTcT", 70_001)


def test_mcp_big_text_matches_the_test_server() -> None:
    """The campaign's copy of the server's big_text is the server's own output."""
    spec = importlib.util.spec_from_file_location("chaos_test_server", TEST_SERVER)
    assert spec is not None
    assert spec.loader is not None
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    for size in (0, 1, 99, 25_321):
        assert mcp_big_text(size) == server._lines(size)


# -- checkers: each catches a broken input ------------------------------------------------


def test_order_checker_catches_swapped_missing_and_foreign_responses() -> None:
    """Swapped, missing or mislabelled responses, and parts not the responses'."""
    expected = [_spec("a", position=0), _spec("b", position=1)]
    good = [_response("a"), _response("b")]
    parts = [p for r in good for p in r.parts]
    assert checks.order_problems(expected, good, parts) == []
    assert checks.order_problems(expected, good[::-1], parts[::-1])
    assert checks.order_problems(expected, good[:1], parts[:1])
    assert checks.order_problems(expected, [*good, _response("c")], parts)
    foreign = _response("a").with_parts(_response("zzz").parts)
    assert checks.order_problems(expected, [foreign, good[1]], [*foreign.parts, *good[1].parts])
    assert checks.order_problems(expected, good, [*parts, TextPart(text="hook context")]) == []
    assert checks.order_problems(expected, good, [*parts, *_response("c").parts])


def test_status_checker_catches_unmarked_duplicates_and_ignored_stops() -> None:
    """A duplicate that ran, an unknown tool that did not fail as one, a stop not applied."""
    expected = [_spec("a", position=0), _spec("a", expect="duplicate", position=1)]
    duplicate = ToolCallResponse.failed(
        ToolCall(id="a", name="t"), "dup", status="duplicate", error_type="duplicate_call"
    )
    good = [_response("a"), duplicate]

    def problems(responses: list[ToolCallResponse], **stop: Any) -> list[str]:
        options = {"stopped": False, "stop_reason": None, **stop}
        return checks.status_problems(expected, responses, **options)

    assert problems(good) == []
    assert problems([_response("a"), _response("a")])
    unknown = [_spec("u", expect="unknown")]
    assert checks.status_problems(unknown, [_response("u")], stopped=False, stop_reason=None)
    assert problems(good, stopped=True)  # a stop that left no stop_reason
    assert problems(good, stopped=True, stop_reason="policy") == []


def test_status_checker_catches_a_sys_exit_that_was_not_an_error() -> None:
    """sys.exit in a tool must be that call's error, naming SystemExit."""
    spec = CallSpec(
        kind="custom.sys_exit",
        raw={"id": "x", "name": "chaos_exit", "args": {"code": 2}},
        id="x",
        name="chaos_exit",
        expect="run",
        sort_key=(0, 0),
    )
    fine = _response("x", "chaos_exit", status="error", error="tool failed: SystemExit: 2")
    assert checks.status_problems([spec], [fine], stopped=False, stop_reason=None) == []
    quiet = _response("x", "chaos_exit")
    assert checks.status_problems([spec], [quiet], stopped=False, stop_reason=None)


def test_hijack_checker_catches_a_write_into_the_planted_directory(tmp_path: Path) -> None:
    """An artifact the store wrote there, or a file that appeared through a symlink."""
    target = tmp_path / "attackers"
    target.mkdir()
    planted = tmp_path / "fallback"
    planted.symlink_to(target)
    assert checks.hijack_problems([], planted) == []
    (target / "tool-out.txt").write_text("leaked")
    assert checks.hijack_problems([], planted)
    assert checks.hijack_problems([planted / "tool-out.txt"], planted)


def test_budget_checker_catches_text_over_the_budget() -> None:
    """Model-facing text beyond a finite budget; a disabled budget never complains."""
    parts = _response("a", output="x" * 101).parts
    assert checks.budget_problems(parts, 101) == []
    assert checks.budget_problems(parts, 100)
    assert checks.budget_problems(parts, None) == []


def test_media_checker_catches_parts_that_are_not_the_media_they_claim() -> None:
    """A signature then text, a 2 MB MIME type or URI: caught; a real PNG: fine."""
    from bench._chaos_faults import _png_bytes
    from toolbatch import FileData, FileDataPart, InlineData, InlineDataPart

    def inline(mime: str, data: bytes) -> InlineDataPart:
        return InlineDataPart(
            inline_data=InlineData(mime_type=mime, data=base64.b64encode(data).decode())
        )

    assert checks.media_problems([inline("image/png", _png_bytes())]) == []
    assert checks.media_problems([inline("image/png", b"\x89PNG\r\n\x1a\n" + b"text" * 99)])
    assert checks.media_problems([inline("audio/mpeg", b"ID3" + b"text" * 99)])
    assert checks.media_problems([inline("image/png" + "x" * 2_000, _png_bytes())])
    uri = FileDataPart(file_data=FileData(mime_type="image/png", file_uri="gs://" + "u" * 9_000))
    assert checks.media_problems([uri])


def test_field_checker_catches_the_internal_field_in_any_spelling() -> None:
    """Serialized output naming persisted_output_files, as a key or camel-cased."""
    response = _response("a", persisted_output_files=(Path("/tmp/x"),))
    assert checks.field_leaks([checks.model_json(response)]) == 0
    broken = checks.safe_json(response.model_dump(mode="json", exclude=set()))
    broken_with_field = broken[:-1] + ', "persisted_output_files": ["/tmp/x"]}'
    assert checks.field_leaks([broken_with_field, '{"persistedOutputFiles": []}']) == 2


async def test_recorded_checker_catches_a_transcript_that_differs(tmp_path: Path) -> None:
    """A recorded turn whose parts differ from what was sent, or a turn recorded twice."""
    response = _response("a", output="sent \ud83d text")
    turn = Turn(responses=[response], parts=list(response.parts))
    recorder = JsonlRecorder(tmp_path / "t.jsonl")
    await recorder.record_turn(turn)
    recorded = load_session(tmp_path / "t.jsonl")
    assert checks.recorded_problems(turn.parts, recorded) == []
    assert checks.recorded_problems(_response("a", output="other").parts, recorded)
    await recorder.record_turn(turn)
    assert checks.recorded_problems(turn.parts, load_session(tmp_path / "t.jsonl"))


def test_injection_checker_catches_a_hook_path_that_survived() -> None:
    """The hook's path on a response, or listed in the output."""
    injected = "/work/injected/b0001.txt"
    clean = _response("a", persisted_output_files=(Path("/elsewhere"),))
    assert checks.injection_problems([clean], ["no path here"], injected) == []
    carried = _response("a", persisted_output_files=(Path(injected),))
    assert checks.injection_problems([carried], [], injected)
    assert checks.injection_problems([clean], [f"Full output: {injected}"], injected)


def test_artifact_checker_catches_every_way_of_writing_twice(tmp_path: Path) -> None:
    """A path written twice, a name in two directories, equal bytes for one call, a preview
    of a persisted output persisted again."""
    primary, fallback = tmp_path / "p", tmp_path / "f"
    primary.mkdir()
    fallback.mkdir()
    one = primary / "t-a-1.txt"
    two = primary / "t-a-2.txt"
    one.write_bytes(b"complete output")
    two.write_bytes(b"other output")
    owners = {one: ("a", "t"), two: ("b", "t")}
    contents = {one: one.read_bytes(), two: two.read_bytes()}
    dirs = [primary, fallback]
    assert checks.duplicate_artifact_problems([one, two], owners, contents, dirs) == []
    assert checks.duplicate_artifact_problems([one, one], owners, contents, dirs)
    (fallback / one.name).write_bytes(b"complete output")
    assert checks.duplicate_artifact_problems([one], owners, contents, dirs)
    (fallback / one.name).unlink()
    same = {one: b"x", two: b"x"}
    assert checks.duplicate_artifact_problems(
        [one, two], {one: ("a", "t"), two: ("a", "t")}, same, dirs
    )
    preview = {one: contents[one], two: b"preview; full output saved to: " + os.fsencode(one)}
    assert checks.duplicate_artifact_problems([one, two], owners, preview, dirs)
    # A media reference names bytes saved apart: not the same content written twice.
    image = primary / "t-a-part1.png"
    image.write_bytes(b"\x89PNG not really")
    reference = (
        b"[image/png, 20 bytes, not sent inline (why); saved at " + os.fsencode(image) + b"]"
    )
    media = {one: reference, image: image.read_bytes()}
    media_owners = {one: ("a", "t"), image: ("a", "t")}
    assert checks.duplicate_artifact_problems([one, image], media_owners, media, dirs) == []


def test_outside_checker_catches_stray_files_and_unplanted_symlinks(tmp_path: Path) -> None:
    """A file outside the artifact directories, and a symlink nobody planted."""
    allowed = tmp_path / "artifacts"
    allowed.mkdir()
    inside = allowed / "ok.txt"
    inside.write_text("ok")
    assert checks.outside_problems([inside], [allowed]) == []
    assert checks.outside_problems([tmp_path / "escape.txt"], [allowed])
    link = allowed / "link.txt"
    link.symlink_to(tmp_path / "victim")
    assert checks.outside_problems([link], [allowed])
    assert checks.outside_problems([link], [allowed], expected_links=[link]) == []


def test_stray_file_checker_finds_files_outside_the_allowed_trees(tmp_path: Path) -> None:
    """A file a traversal put next to the artifact directory is found; skipped trees are not."""
    allowed = tmp_path / "batch" / "artifacts"
    allowed.mkdir(parents=True)
    (allowed / "ok.txt").write_text("ok")
    (tmp_path / "transcripts").mkdir()
    (tmp_path / "transcripts" / "t.jsonl").write_text("{}")
    skip = [tmp_path / "transcripts"]
    assert checks.stray_files(tmp_path, allowed=[allowed], skip=skip) == []
    escaped = tmp_path / "batch" / "escape-s1b1c1"
    escaped.write_text("traversal")
    assert checks.stray_files(tmp_path, allowed=[allowed], skip=skip) == [escaped]


def test_mode_and_temp_checkers_catch_open_files_and_leftover_temps(tmp_path: Path) -> None:
    """A 0644 artifact, a directory others may enter, a store temp file left behind."""
    directory = tmp_path / "artifacts"
    directory.mkdir(mode=0o700)
    private = directory / "a.txt"
    private.write_text("a")
    private.chmod(0o600)
    assert checks.mode_problems([private], [directory]) == []
    private.chmod(0o644)
    assert checks.mode_problems([private], [directory])
    private.chmod(0o600)
    directory.chmod(0o755)
    assert checks.mode_problems([private], [directory])
    assert checks.temp_files([directory]) == []
    (directory / ".tmp-abc.part").write_text("partial")
    assert checks.temp_files([directory])


def test_env_checker_catches_the_canary_and_undocumented_variables() -> None:
    """The canary by name or value, a variable nobody documented, a configured one missing."""
    good = {"PATH": "/bin", "CHAOS_RUN": "m"}
    options: dict[str, Any] = {
        "allowed": ["PATH", "HOME"],
        "configured": {"CHAOS_RUN": "m"},
        "canary": "canary-123",
        "who": "hook",
    }
    assert checks.env_problems(good, **options) == []
    assert checks.env_problems({**good, "SECRET": "canary-123"}, **options)
    assert checks.env_problems({**good, "OPENAI_API_KEY": "sk-..."}, **options)
    assert checks.env_problems({"PATH": "/bin"}, **options)


def test_hook_input_measure_counts_the_model_facing_text() -> None:
    """The hook-budget check measures hook input the way the budget is measured."""
    payload = {"tool_calls": [{"tool_response": {"parts": [{"text": "abc"}]}}] * 2}
    assert checks.hook_input_chars(payload) == 6


def test_process_checker_finds_a_marked_process_until_it_is_gone() -> None:
    """A real process carrying the marker is found (unless its group is excluded)."""
    marker = f"CHAOS_RUN=test-{os.getpid()}"
    env = {**os.environ, "CHAOS_RUN": marker.split("=", 1)[1]}
    child = subprocess.Popen(["sleep", "30"], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while child.pid not in checks.marked_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.01)  # until exec, the child's /proc environ is still ours
        assert child.pid in checks.marked_processes(marker)
        assert child.pid not in checks.marked_processes(marker, exclude_pgids=[child.pid])
        assert child.pid not in checks.marked_processes("CHAOS_RUN=someone-else")
    finally:
        child.kill()
        child.wait()
    assert child.pid not in checks.marked_processes(marker)


def test_fd_checker_catches_a_descriptor_left_open(tmp_path: Path) -> None:
    """A file descriptor opened after the baseline and never closed."""
    baseline = checks.open_fds()
    assert checks.fd_problems(baseline, checks.open_fds()) == []
    fds = [os.open(tmp_path / f"leak{n}", os.O_CREAT | os.O_WRONLY, 0o600) for n in range(2)]
    try:
        problems = checks.fd_problems(baseline, checks.open_fds())
        assert len(problems) == 2
        assert str(tmp_path / "leak0") in problems[0]
    finally:
        for fd in fds:
            os.close(fd)


def test_log_probe_counts_the_field_and_command_hook_crashes() -> None:
    """A log event naming the field is counted; a command hook crash is noted; none is kept."""
    report = CampaignReport(options=CampaignOptions())
    probe = _LogProbe(report, {"persisted_output_files": "field_serialized"}, verbose=False)
    with pytest.raises(structlog.DropEvent):
        probe(None, "info", {"event": "x", "detail": {"persisted_output_files": []}})
    with pytest.raises(structlog.DropEvent):
        probe(None, "warning", {"event": "hooks.crashed", "hook": "command:python", "error": "e"})
    assert report.violations["field_serialized"] == 1
    assert probe.hook_crashes == ["e"]
    assert report.warnings["hooks.crashed"] == 1


def test_every_violation_counter_makes_the_campaign_fail() -> None:
    """Any counter above zero fails the report, and the table says which."""
    for key, text in VIOLATIONS.items():
        report = CampaignReport(options=CampaignOptions())
        assert not report.failed
        report.count(key, 3, ["broken on purpose"], per_batch=True)
        assert report.failed
        table = format_report(report)
        assert "FAIL" in table
        assert text in table
        assert "batch 3: broken on purpose" in table


@pytest.mark.parametrize(
    ("args", "error"),
    [
        pytest.param(["--batches", "0"], "--batches must be at least 1, got 0", id="batches"),
        pytest.param(["--cover", "0"], "--cover must be at least 1 batch, got 0", id="cover"),
        pytest.param(["--indices", "3", "-1"], "batch numbers >= 0, got -1", id="indices"),
        pytest.param(["--indices"], "expected at least one argument", id="no-indices"),
    ],
)
def test_the_command_line_rejects_an_empty_campaign(
    args: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No batches, or a batch number below 0, is a usage error naming the option and value."""
    with pytest.raises(SystemExit) as raised:
        main(args)
    assert raised.value.code == 2
    assert error in capsys.readouterr().err


# -- the fault injection is real --------------------------------------------------------


@pytest.mark.skipif(not eacces_is_real(), reason="the kernel does not refuse /sys/kernel writes")
async def test_chaos_store_refusals_are_real_eacces_and_fall_back(tmp_path: Path) -> None:
    """Refused primary writes meet a real EACCES; one-shot and streamed output fall back."""
    store = ChaosStore(tmp_path / "p", fallback_dir=tmp_path / "f", deny_percent=100)
    path = await store.persist("c1", "tool", "complete output")
    assert path.parent == tmp_path / "f"
    async with store.open_stream("c2", "tool") as stream:
        await stream.write(b"streamed output")
        streamed = await stream.commit()
    assert streamed.parent == tmp_path / "f"
    assert store.denied == 2
    assert store.owners == {path: ("c1", "tool"), streamed: ("c2", "tool")}
    with pytest.raises(PermissionError) as raised:
        os.open("/sys/kernel/chaos-probe", os.O_CREAT | os.O_WRONLY)
    assert raised.value.errno == errno.EACCES


async def test_planted_symlinks_sit_exactly_where_artifacts_are_written(tmp_path: Path) -> None:
    """Symlinks computed with the store's naming are hit and replaced; victims stay intact."""
    salt = "sTbT"
    calls = [
        CallSpec(
            kind="shell.huge",
            raw={
                "id": "c0",
                "name": "run_shell_command",
                "args": {"command": shell_yes_command(f"{salt}c0", 45_000)},
            },
            id="c0",
            name="run_shell_command",
            expect="run",
            sort_key=(0, 0),
            artifact=ArtifactSpec("c0", "run_shell_command", ("shell_yes", f"{salt}c0", 45_000)),
        ),
        CallSpec(
            kind="custom.big",
            raw={"id": "../c1", "name": "chaos_big", "args": {"n_chars": 9_500, "salt": salt}},
            id="../c1",
            name="chaos_big",
            expect="run",
            sort_key=(1, 1),
            artifact=ArtifactSpec("../c1", "chaos_big", ("custom_big", 9_500, salt)),
        ),
    ]
    plan = BatchPlan(
        index=0, salt=salt, calls=tuple(calls), budget=None, concurrency=2, call_timeout=10.0
    )
    store = ChaosStore(tmp_path / "artifacts", fallback_dir=tmp_path / "fallback")
    victims = tmp_path / "victims"
    victims.mkdir()
    planted = plant_symlinks(store, plan, victims)
    assert len(planted) == 4
    config = SchedulerConfig(batch_budget=None, store=store)
    async with ToolScheduler(build_registry([]), config) as scheduler:
        await scheduler.run_batch(plan.raw_calls)
    in_primary = [item.link for item in planted if item.link.parent == store.primary]
    assert sorted(store.written) == sorted(in_primary)
    assert all(link.is_file() and not link.is_symlink() for link in in_primary)
    assert all(item.victim.read_bytes() == VICTIM_BYTES for item in planted)


def test_small_disk_fills_up_for_real(tmp_path: Path) -> None:
    """The tmpfs really runs out of space (ENOSPC from the kernel)."""
    disk = SmallDisk(tmp_path / "small")
    if not disk.mount():
        pytest.skip(disk.problem or "no tmpfs here")
    try:
        disk.fill(0)
        with (
            pytest.raises(OSError, match="No space left") as raised,
            open(disk.mount_point / "more", "wb") as file,
        ):
            file.write(b"x" * 65_536)
            file.flush()
            os.fsync(file.fileno())
        assert raised.value.errno == errno.ENOSPC
        disk.clear()
        assert list(disk.mount_point.iterdir()) == []
    finally:
        disk.unmount()


# -- regressions found by the campaign -----------------------------------------------------


async def test_a_hook_replacing_a_shell_result_by_the_name_it_was_shown_answers_the_call(
    tmp_path: Path,
) -> None:
    """Seed 24, batch 135: a PostToolBatch hook is shown the shell as ``Bash`` and answers
    with that name; the model still gets a functionResponse for its ``run_shell_command``
    call, in its place."""
    shown: list[str] = []

    async def replace_first(batch: PostToolBatchInput) -> PostToolBatchOutput:
        [target] = [call for call in batch.tool_calls if call.tool_use_id == "s"]
        shown.append(target.tool_name)
        answer = FunctionResponse(
            id=target.tool_use_id, name=target.tool_name, response={"output": "by a hook"}
        )
        part = FunctionResponsePart(function_response=answer)
        given = ToolCallResponse(call_id=target.tool_use_id, name=target.tool_name, parts=[part])
        return PostToolBatchOutput(replace={target.tool_use_id: given})

    calls = [
        {"id": "s", "name": "run_shell_command", "args": {"command": "echo s"}, "ordinal": 1},
        {"id": "e", "name": "chaos_echo", "args": {"text": "e"}, "ordinal": 0},
    ]
    expected = [_spec("e", "chaos_echo", position=0), _spec("s", "run_shell_command", 1)]
    config = SchedulerConfig(
        store=ChaosStore(tmp_path / "a", fallback_dir=tmp_path / "f"), hooks=[replace_first]
    )
    async with ToolScheduler(build_registry([]), config) as scheduler:
        turn = await scheduler.run_batch(calls)
    assert shown == ["Bash"]  # the shell's name as Claude Code's hooks know it
    assert checks.order_problems(expected, turn.responses, turn.parts) == []
    first = turn.responses[1].parts[0]
    assert isinstance(first, FunctionResponsePart)
    answer = first.function_response
    assert (answer.id, answer.name) == ("s", "run_shell_command")
    assert answer.response == {"output": "by a hook"}


async def test_a_hanging_disk_delays_a_turn_by_one_persist_deadline_not_one_per_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed 24, batch 121: the disk hangs, the first finalize pass cuts a result and a hook
    replaces it with new text the second pass cuts too; the turn waits for the store once
    (the persist deadline, 2 s here), not once per pass, and never past the caller's scope."""
    monkeypatch.setattr(toolbatch.artifacts._deadline, "DEFAULT_PERSIST_TIMEOUT_S", 2.0)
    store = ChaosStore(tmp_path / "a", fallback_dir=tmp_path / "f")
    store.disk_back.clear()

    async def replace(batch: PostToolBatchInput) -> PostToolBatchOutput:
        call_id = batch.tool_calls[0].tool_use_id
        given = _response(call_id, "chaos_echo", output="replaced by a hook\n" * 2_000)
        return PostToolBatchOutput(replace={call_id: given})

    calls = [{"id": "e", "name": "chaos_echo", "args": {"text": "a line of output\n" * 2_000}}]
    config = SchedulerConfig(batch_budget=5_000, store=store, hooks=[replace])
    try:
        async with ToolScheduler(build_registry([]), config) as scheduler:
            started = time.monotonic()
            with anyio.fail_after(10):  # before: 30 s a pass, the caller's scope ignored
                turn = await scheduler.run_batch(calls)
            elapsed = time.monotonic() - started
    finally:
        store.disk_back.set()
    assert elapsed < 3.5  # one 2 s deadline; one a pass would be over 4 s
    [response] = turn.responses
    assert response.content_length <= 5_000
    assert response.persisted_output_files == ()
    assert "replaced by a hook" in checks.dump_parts(response.parts)


# -- the short campaign (the CI run of `make chaos`) ---------------------------------------

KNOWN_BUGS: dict[str, str] = {}
# The campaign runs once, in one xdist worker, for the tests that share it.
campaign = pytest.mark.xdist_group("chaos-campaign")


@pytest.fixture(scope="module")
def ci_indices() -> tuple[int, ...]:
    return tuple(sorted({*covering_batches(CI_SEED, search=CI_SEARCH), *REGRESSIONS}))


@pytest.fixture(scope="module")
def ci_report(ci_indices: tuple[int, ...]) -> CampaignReport:
    """One campaign with a fixed seed, shared by the tests below."""
    skip = {kind: "runs in " + " and ".join(tests) for kind, tests in ELSEWHERE.items()}
    options = CampaignOptions(seed=CI_SEED, indices=ci_indices, skip_boundaries=skip)
    return anyio.run(run_campaign, options)


@campaign
def test_short_campaign_holds_every_invariant(ci_report: CampaignReport) -> None:
    """No violation counter is above zero (known, reported bugs aside: see KNOWN_BUGS)."""
    failing = [key for key in VIOLATIONS if ci_report.violations[key] and key not in KNOWN_BUGS]
    assert failing == [], format_report(ci_report)


@campaign
def test_short_campaign_shows_every_command_hook_the_batch(ci_report: CampaignReport) -> None:
    """A command hook is never skipped because of what a tool printed or a model sent."""
    assert ci_report.violations["hooks_skipped"] == 0, format_report(ci_report)


@campaign
def test_short_campaign_really_injects_its_faults(
    ci_report: CampaignReport, ci_indices: tuple[int, ...]
) -> None:
    """The campaign is not vacuous: every fault kind was injected and really bit."""
    faults, totals = ci_report.faults, ci_report.totals
    planned = set().union(*(fault_kinds(plan_batch(CI_SEED, i)) for i in range(CI_SEARCH)))
    not_here = set(ci_report.skipped)
    if "store.disk_full" in not_here:
        not_here.add("recorder.full_disk")
    assert sorted(kind for kind in planned - not_here if faults[kind] <= 0) == []
    for kind in (
        "mcp.crash",
        "mcp.env",
        "store.symlink",
        "hook.py.inject",
        "hook.cmd.block",
        "hostile_id",
        "hostile_name",
        "abort",
        "hard_cancel",
        "duplicate",
        "malformed",
        "budget.tiny",
        "custom.sys_exit",
        "store.hijacked_fallback",
        *(kind for kind in BOUNDARY_KINDS if kind not in ELSEWHERE),
    ):
        assert faults[kind] > 0, kind
    assert sum(count for kind, count in faults.items() if kind.startswith("media.")) > 0
    assert totals["boundary faults survived"] == len(BOUNDARY_KINDS) - len(ELSEWHERE)
    assert totals["batches with a hijacked fallback, nothing written"] > 0
    assert totals["batches"] == len(ci_indices)
    assert totals["artifacts written"] > 0
    assert totals["artifacts in the fallback directory"] > 0
    assert totals["planted symlinks replaced by the artifact"] > 0
    assert totals["hook injections attempted"] > 0
    assert totals["MCP server environments checked"] > 0
    assert totals["command hook environments checked"] > 0
    if "store.eacces" not in ci_report.skipped:
        assert totals["primary writes refused (EACCES)"] > 0
    if "store.disk_full" not in ci_report.skipped:
        assert faults["store.disk_full"] > 0
        assert faults["recorder.full_disk"] > 0
        assert totals["transcript appends failed (full disk)"] > 0
