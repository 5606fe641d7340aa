"""The chaos campaign's checkers: each returns the problems it finds, one string per problem.

They take plain data (responses, parts, paths, bytes, environments) so each can be shown a
deliberately broken input in ``tests/test_chaos.py``: a checker that cannot fail is a
defect. The /proc readers (``marked_processes``, ``open_fds``) read the live system.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from bench._chaos_plan import CallSpec
from toolbatch import (
    FileDataPart,
    FunctionResponsePart,
    InlineDataPart,
    Part,
    TextPart,
    ToolCallResponse,
    parts_adapter,
)
from toolbatch._core import file_uri_problem, media_type_problem, verify_media
from toolbatch.finalize import response_text_length

__all__ = [
    "FIELD_NEEDLES",
    "budget_problems",
    "dump_parts",
    "duplicate_artifact_problems",
    "env_problems",
    "fd_problems",
    "field_leaks",
    "hook_input_chars",
    "injection_problems",
    "marked_processes",
    "mode_problems",
    "open_fds",
    "order_problems",
    "outside_problems",
    "recorded_problems",
    "safe_json",
    "status_problems",
    "stray_files",
    "temp_files",
]

FIELD_NEEDLES: Final = ("persisted_output_files", "persistedOutputFiles")
"""The internal field, under either spelling: it must never be serialized."""
TEMP_PREFIX: Final = ".tmp-"
"""The artifact store's temp files start with this (they must never outlive a write)."""


def safe_json(value: Any) -> str:
    """``value`` as ASCII JSON, whatever strings it holds (lone surrogates included)."""
    return json.dumps(value, ensure_ascii=True, default=repr)


def dump_parts(parts: Sequence[Part]) -> str:
    """Parts exactly as they go on the wire, as one JSON string (for comparisons)."""
    return safe_json(parts_adapter.dump_python(list(parts), mode="json", by_alias=True))


def model_json(model: Any) -> str:
    """A pydantic model through its own JSON serializer, or ASCII JSON when it refuses."""
    try:
        text: str = model.model_dump_json()
    except PydanticSerializationError:
        text = safe_json(model.model_dump(mode="json"))
    return text


# -- responses ------------------------------------------------------------------------


def order_problems(
    expected: Sequence[CallSpec],
    responses: Sequence[ToolCallResponse],
    parts: Sequence[Part],
) -> list[str]:
    """A missing, extra or out-of-order response, or parts that are not the responses'."""
    problems: list[str] = []
    if len(responses) != len(expected):
        problems.append(f"{len(responses)} responses for {len(expected)} calls")
    for position, (spec, response) in enumerate(zip(expected, responses, strict=False)):
        if response.call_id != spec.id or response.name != spec.name:
            problems.append(
                f"position {position}: expected {spec.id[:60]!r}/{spec.name[:60]!r}, got "
                f"{response.call_id[:60]!r}/{response.name[:60]!r}"
            )
            continue
        first = response.parts[0] if response.parts else None
        if not isinstance(first, FunctionResponsePart):
            problems.append(f"position {position}: no functionResponse part first")
        elif first.function_response.id != spec.id or first.function_response.name != spec.name:
            problems.append(f"position {position}: its functionResponse answers another call")
    flattened = [part for response in responses for part in response.parts]
    if dump_parts(flattened) != dump_parts(parts[: len(flattened)]):
        problems.append("the turn's parts are not its responses' parts in order")
    if not all(isinstance(part, TextPart) for part in parts[len(flattened) :]):
        problems.append("the turn's own parts (after the responses) are not text")
    return problems


def status_problems(
    expected: Sequence[CallSpec],
    responses: Sequence[ToolCallResponse],
    *,
    stopped: bool,
    stop_reason: str | None,
) -> list[str]:
    """A duplicate, unknown or malformed call not answered as such; a stop not applied (a
    stop keeps every result: it is the turn's ``stop_reason``, never a rewritten response)."""
    problems: list[str] = []
    if stopped and stop_reason is None:
        problems.append("a hook stopped the batch but the turn has no stop_reason")
    for position, (spec, response) in enumerate(zip(expected, responses, strict=False)):
        wrong = None
        if spec.expect == "duplicate" and response.status != "duplicate":
            wrong = f"duplicate call answered with status {response.status!r}"
        elif spec.expect == "unknown" and response.error_type != "unknown_tool":
            wrong = f"unknown tool answered with error_type {response.error_type!r}"
        elif spec.expect == "invalid" and response.error_type != "invalid_call":
            wrong = f"malformed call answered with error_type {response.error_type!r}"
        elif spec.expect == "run" and (
            response.status == "duplicate"
            or response.error_type in ("unknown_tool", "invalid_call", "hook_stopped")
        ):
            wrong = f"call was not run: {response.status!r}/{response.error_type!r}"
        elif (
            spec.kind == "custom.sys_exit"
            and response.status != "cancelled"
            and (response.status != "error" or "SystemExit" not in str(response.error))
        ):
            wrong = f"sys.exit in a tool answered {response.status!r}: {response.error!r}"
        if wrong is not None:
            problems.append(f"position {position} ({spec.kind}): {wrong}")
    return problems


def budget_problems(parts: Sequence[Part], budget: int | None) -> list[str]:
    """Model-facing tool text over a finite budget."""
    if budget is None or budget <= 0:
        return []
    used = response_text_length(parts)
    return [f"{used:,} characters for a budget of {budget:,}"] if used > budget else []


def media_problems(parts: Sequence[Part]) -> list[str]:
    """Media parts sent as media that are not: bytes that do not parse as a whole image or
    audio, a malformed or overlong MIME type, an overlong file URI (their strings would
    escape the budget)."""
    problems: list[str] = []
    for part in parts:
        if isinstance(part, InlineDataPart):
            inline = part.inline_data
            if media_type_problem(inline.mime_type) is not None:
                problems.append(f"a {len(inline.mime_type):,}-character MIME type sent as media")
                continue
            data = base64.b64decode(inline.data)
            found = verify_media(data)
            major = inline.mime_type.partition("/")[0].lower()
            if found is None or not found.mime_type.startswith(major):
                problems.append(f"{len(data):,} bytes labelled {inline.mime_type} sent as media")
        elif isinstance(part, FileDataPart):
            data_ = part.file_data
            problem = media_type_problem(data_.mime_type) or file_uri_problem(data_.file_uri)
            if problem is not None:
                problems.append(f"a file reference sent as media: {problem}")
    return problems


def hook_input_chars(payload: Mapping[str, Any]) -> int:
    """The model-facing text a hook was shown (its input's parts, measured like a turn)."""
    total = 0
    for call in payload.get("tool_calls", []):
        parts = call.get("tool_response", {}).get("parts", [])
        try:
            total += response_text_length(parts_adapter.validate_python(parts))
        except ValidationError:
            total += len(safe_json(parts))
    return total


def field_leaks(texts: Iterable[str]) -> int:
    """How many of ``texts`` name the internal persistence field."""
    return sum(1 for text in texts if any(needle in text for needle in FIELD_NEEDLES))


def recorded_problems(sent: Sequence[Part], recorded: Sequence[Any]) -> list[str]:
    """The transcript's tool turn differs from the parts that were sent."""
    turns = [entry for entry in recorded if entry.type == "tool_turn"]
    if len(turns) != 1:
        return [f"{len(turns)} tool turns recorded for one batch"]
    if dump_parts(turns[0].parts) != dump_parts(sent):
        return ["recorded parts differ from the parts sent"]
    return []


def injection_problems(
    responses: Sequence[ToolCallResponse], texts: Iterable[str], injected: str
) -> list[str]:
    """A hook's ``persisted_output_files`` survived: on a response, or as a listed path."""
    problems = [
        f"response {response.call_id[:60]!r} carries the hook's path"
        for response in responses
        if any(os.fspath(path) == injected for path in response.persisted_output_files or ())
    ]
    problems.extend(
        "the hook's path appears in the serialized output" for text in texts if injected in text
    )
    return problems


# -- artifacts --------------------------------------------------------------------------


def duplicate_artifact_problems(
    written: Sequence[Path],
    owners: Mapping[Path, tuple[str, str]],
    contents: Mapping[Path, bytes],
    directories: Sequence[Path],
) -> list[str]:
    """Output written twice.

    Four ways: a path written twice; one artifact name in two directories; the same bytes
    twice under one call's key; an artifact that holds another artifact's path (a preview
    of output already persisted, persisted again).
    """
    problems: list[str] = []
    seen: set[Path] = set()
    for path in written:
        if path in seen:
            problems.append(f"{path.name[:80]} written twice")
        seen.add(path)
    names: dict[str, list[Path]] = defaultdict(list)
    for directory in directories:
        if directory.is_dir():
            for entry in directory.iterdir():
                if entry.is_file() and not entry.is_symlink():
                    names[entry.name].append(directory)
    problems.extend(
        f"{name[:80]} exists in {len(where)} directories"
        for name, where in names.items()
        if len(where) > 1
    )
    by_key: dict[tuple[str, str, str], set[Path]] = defaultdict(set)
    for path in seen:
        data = contents.get(path)
        if data is None:
            continue
        call_id, tool = owners.get(path, ("?", "?"))
        by_key[(call_id, tool, hashlib.sha256(data).hexdigest())].add(path)
    problems.extend(
        f"{len(paths)} files with the same content for call {key[0][:60]!r}"
        for key, paths in by_key.items()
        if len(paths) > 1
    )
    for path in seen:
        data = contents.get(path)
        if data is None:
            continue
        for other in seen:
            if other != path and os.fsencode(other) in data:
                if other.suffix != ".txt" and b"; saved at " + os.fsencode(other) + b"]" in data:
                    # A media reference (``[image/png, ..., not sent inline (...); saved at
                    # <file>]``) names bytes saved apart; the text holds none of them.
                    continue
                problems.append(f"{path.name[:80]} holds the path of {other.name[:80]}")
    return problems


def outside_problems(
    files: Iterable[Path], allowed: Sequence[Path], *, expected_links: Iterable[Path] = ()
) -> list[str]:
    """Files outside the allowed directories, and symlinks nobody planted."""
    planted = set(expected_links)
    problems: list[str] = []
    for path in files:
        if not any(path.parent == directory for directory in allowed):
            problems.append(f"file outside the artifact directories: {str(path)[:200]!r}")
        elif path.is_symlink() and path not in planted:
            problems.append(f"unexpected symlink {path.name[:80]}")
    return problems


def mode_problems(files: Iterable[Path], directories: Iterable[Path]) -> list[str]:
    """Artifact files that are not 0600, directories others may enter."""
    problems: list[str] = []
    for path in files:
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) != 0o600:
            problems.append(f"{path.name[:80]} has mode {stat.S_IMODE(info.st_mode):o}")
    for directory in directories:
        if directory.is_dir() and stat.S_IMODE(directory.stat().st_mode) & 0o077:
            problems.append(f"directory {directory} has mode {directory.stat().st_mode:o}")
    return problems


def temp_files(directories: Iterable[Path]) -> list[Path]:
    """The store's temp files left in ``directories``."""
    return [
        entry
        for directory in directories
        if directory.is_dir()
        for entry in directory.iterdir()
        if entry.name.startswith(TEMP_PREFIX)
    ]


# -- environments -----------------------------------------------------------------------


def env_problems(
    env: Mapping[str, str],
    *,
    allowed: Iterable[str],
    configured: Mapping[str, str],
    canary: str,
    who: str,
) -> list[str]:
    """The canary secret, or any variable not documented or configured, in ``env``."""
    problems: list[str] = []
    permitted = set(allowed) | set(configured)
    for name, value in env.items():
        if canary in name or canary in value:
            problems.append(f"{who} sees the canary secret in {name}")
        elif name not in permitted:
            problems.append(f"{who} sees undocumented variable {name}")
    for name, value in configured.items():
        if env.get(name) != value:
            problems.append(f"{who} lacks its configured variable {name}")
    return problems


# -- processes and file descriptors -------------------------------------------------------


def marked_processes(
    marker: str, *, exclude_pgids: Iterable[int] = (), exclude_pids: Iterable[int] = ()
) -> dict[int, str]:
    """Live processes whose environment holds ``marker`` (``NAME=value``), by pid.

    Zombies are left out (they hold a pid and nothing else, and their environment is
    gone), as are the excluded pids and process groups. The value is the command line.
    """
    needle = marker.encode()
    skip_pids = {os.getpid(), *exclude_pids}
    skip_groups = set(exclude_pgids)
    found: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip_pids:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as file:
                environ = file.read()
            if needle not in environ.split(b"\0"):
                continue
            with open(f"/proc/{name}/stat", "rb") as file:
                fields = file.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{name}/cmdline", "rb") as file:
                cmdline = file.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue  # gone while we looked
        state, pgid = fields[0], int(fields[2])
        if state in (b"Z", b"X") or pgid in skip_groups:
            continue
        found[int(name)] = cmdline[:120]
    return found


def open_fds() -> dict[int, str]:
    """This process's open file descriptors and what they point to."""
    fds: dict[int, str] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            fds[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the fd of the listing itself, closed by now
    return fds


def fd_problems(baseline: Mapping[int, str], now: Mapping[int, str]) -> list[str]:
    """One problem per file descriptor open now beyond the baseline's count."""
    grown = len(now) - len(baseline)
    if grown <= 0:
        return []
    new = [
        f"fd {fd} -> {target}" for fd, target in sorted(now.items()) if baseline.get(fd) != target
    ]
    new += ["an fd number reused for another file"] * (grown - len(new))
    return new[:grown]


def stray_files(root: Path, *, allowed: Iterable[Path], skip: Iterable[Path]) -> list[Path]:
    """Files (and symlinks) under ``root`` outside the ``allowed`` and ``skip`` trees."""
    excluded = {*allowed, *skip}
    found: list[Path] = []
    for current, dirs, names in os.walk(root):
        here = Path(current)
        dirs[:] = [name for name in dirs if here / name not in excluded]
        found += [here / name for name in names if here / name not in excluded]
    return found


def hijack_problems(written: Iterable[Path], hijacked: Path) -> list[str]:
    """Anything written into (or through) a fallback directory someone else planted."""
    target = hijacked.resolve()
    problems = [f"artifact written to {path}" for path in written]
    if target.is_dir():
        problems += [
            f"{entry.name} appeared in the hijacked directory" for entry in target.iterdir()
        ]
    return problems
