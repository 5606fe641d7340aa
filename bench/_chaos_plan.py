"""The chaos campaign's plans: what each batch calls, with which budget, hooks and faults.

Pure and seeded: ``plan_batch(seed, index)`` depends on nothing else, so the same seed gives
the same sequence of batches and faults on every machine, and a batch's plan never depends
on how earlier batches went. What a plan cannot fix in advance is timing: which calls an
abort catches, whether a slow call beats its timeout on a loaded machine, which streamed
write a random permission failure hits when an abort stops a call before it writes.

Every call's output carries a salt unique to the call (``s<seed>b<batch>c<call>``), so two
artifacts with the same content can only come from the same output written twice.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "HOOK_KINDS",
    "HOSTILE_MEDIA_KINDS",
    "MCP_SERVER",
    "ArtifactSpec",
    "BatchPlan",
    "CallSpec",
    "Expect",
    "artifact_bytes",
    "big_text",
    "covering_batches",
    "fault_kinds",
    "mcp_big_text",
    "plan_batch",
    "plan_digest",
    "shell_yes_bytes",
]

MCP_SERVER: Final = "chaos"
SHELL: Final = "run_shell_command"
SHELL_TIMEOUT_S: Final = 1.0
"""The timeout hanging shell commands ask for."""
MCP_TIMEOUT_S: Final = 1.5
"""The MCP server's call timeout (its ``timeout`` entry); ``slow`` beyond it times out."""
CUSTOM_BIG_THRESHOLD_CHARS: Final = 8_000
"""``chaos_big``'s output_threshold: longer output goes through generic persistence."""
MCP_TRIGGER_CHARS: Final = 20_000
"""The MCP producer's large-output trigger in the campaign (the default is 500,000)."""

Expect: TypeAlias = Literal["run", "duplicate", "unknown", "invalid"]

HOOK_KINDS: Final = (
    "py.crash",
    "py.hang",
    "py.garbage",
    "py.stop",
    "py.context",
    "py.inject",
    "cmd.ok",
    "cmd.context",
    "cmd.crash",
    "cmd.hang",
    "cmd.garbage",
    "cmd.block",
    "cmd.decision",
    "cmd.background",
    "cmd.flood",
)
STOPPING_HOOKS: Final = frozenset({"py.stop", "cmd.block", "cmd.decision"})
HOSTILE_MEDIA_KINDS: Final = (
    "png_then_text",
    "png_with_text_tail",
    "bm_text",
    "id3_text",
    "long_mime",
    "long_uri",
    "long_file_mime",
)
"""Media parts that must not pass as media (issue 29): a signature then text, a real image
then text, text starting with BM or ID3, a 2 MB MIME type or file URI."""


@dataclass(frozen=True, slots=True)
class ArtifactSpec:
    """An artifact a call is certain to write, to plant a symlink at its exact name.

    Attributes:
        persist_id: the call id the producer persists under.
        tool: the tool name it persists under.
        source: how to rebuild the exact bytes (see ``artifact_bytes``).
        suffix: the artifact's suffix.
    """

    persist_id: str
    tool: str
    source: tuple[Any, ...]
    suffix: str = ".txt"


@dataclass(frozen=True, slots=True)
class CallSpec:
    """One call of a batch and what its response must look like.

    Attributes:
        kind: the fault or behaviour it exercises (``shell.huge``, ``mcp.crash``, ...).
        raw: what is handed to ``run_batch`` (a call dict, or something malformed).
        id: the call id its response must carry.
        name: the tool name its response must carry.
        expect: how the scheduler must treat it.
        sort_key: where its response goes (ordinal, then list position).
        slow: whether it is expected to take a second or so.
        artifact: the artifact it will write, when that is known in advance.
    """

    kind: str
    raw: Any
    id: str
    name: str
    expect: Expect
    sort_key: tuple[int, int]
    slow: bool = False
    artifact: ArtifactSpec | None = None


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """Everything about one batch that the seed decides.

    Attributes:
        index: the batch number (0-based).
        salt: the batch's salt (``s<seed>b<index>``).
        calls: the calls in list order (``expected_order`` gives the response order).
        budget: the aggregate budget (``None``: disabled).
        concurrency: the scheduler's concurrency limit.
        call_timeout: the scheduler's per-call ceiling in seconds.
        hooks: the hook kinds to install (an observing Python hook comes with any).
        eacces_percent: the share of primary-directory writes refused with EACCES.
        disk_full: whether the primary (and maybe fallback) directory is on a full disk.
        disk_free_bytes: the room left on that disk.
        fallback_on_small_fs: whether the fallback directory is on the full disk too.
        symlinks: whether symlinks are planted at the artifacts' exact names.
        abort_after_s: when the user aborts, if they do.
        hard_cancel_after_s: when the caller cancels ``run_batch`` itself, if it does.
        shuffled: whether the calls carry ordinals that differ from their positions.
        recorder_free_bytes: when set, the transcript sits on the full disk with this much
            room left, so the turn's append fails (torn, then cut back) or just fits.
        hijacked_fallback: when set, how the fallback directory was planted before the
            store opened (``other-owner``, ``world-writable`` or ``symlink``), with the
            primary unusable, so every write would need it.
        faults: every fault and behaviour in the batch, counted by kind.
    """

    index: int
    salt: str
    calls: tuple[CallSpec, ...]
    budget: int | None
    concurrency: int
    call_timeout: float
    hooks: tuple[str, ...] = ()
    eacces_percent: int = 0
    disk_full: bool = False
    disk_free_bytes: int = 0
    fallback_on_small_fs: bool = False
    symlinks: bool = False
    abort_after_s: float | None = None
    hard_cancel_after_s: float | None = None
    shuffled: bool = False
    recorder_free_bytes: int | None = None
    hijacked_fallback: Literal["other-owner", "world-writable", "symlink"] | None = None
    disk_delay: Literal["slow", "hanging"] | None = None
    """A slow disk (each fsync waits 4 s) or a hanging one (fsyncs return only after the
    batch): every persist must give up at its deadline with nothing lost."""
    recording_symlinked: bool = False
    """A command swaps the transcript for a symlink to a victim file before the turn is
    recorded: the record must fail, the victim stay untouched."""
    faults: Counter[str] = field(default_factory=Counter)

    @property
    def raw_calls(self) -> list[Any]:
        """The list handed to ``run_batch``."""
        return [call.raw for call in self.calls]

    @property
    def expected_order(self) -> list[CallSpec]:
        """The calls in the order their responses must come back."""
        return sorted(self.calls, key=lambda call: call.sort_key)

    @property
    def stops(self) -> bool:
        """Whether a planned hook stops the batch."""
        return any(kind in STOPPING_HOOKS for kind in self.hooks)


# -- deterministic outputs ------------------------------------------------------------


def big_text(n_chars: int, salt: str) -> str:
    """``chaos_big``'s output: ``n_chars`` characters of lines that start with the salt."""
    line = f"{salt} custom output line, deterministic for its salt and size\n"
    return (line * (n_chars // len(line) + 1))[:n_chars]


def mcp_big_text(n_chars: int) -> str:
    """The test server's ``big_text(n_chars)`` (its docstring is the contract)."""
    pieces: list[str] = []
    total = 0
    index = 0
    while total < n_chars:
        index += 1
        line = f"line {index:06d} " + "abcdefghijklmnopqrstuvwxyz" * 3 + "\n"
        pieces.append(line)
        total += len(line)
    return "".join(pieces)[:n_chars]


def shell_yes_command(salt: str, n_bytes: int) -> str:
    """A command printing the salt, then ``n_bytes`` of ``yes`` lines."""
    return f"printf '%s\\n' {salt}; yes chaos-{salt} | head -c {n_bytes}"


def shell_yes_bytes(salt: str, n_bytes: int) -> bytes:
    """What ``shell_yes_command(salt, n_bytes)`` prints, exactly."""
    line = f"chaos-{salt}\n".encode()
    return f"{salt}\n".encode() + (line * (n_bytes // len(line) + 1))[:n_bytes]


def artifact_bytes(spec: ArtifactSpec) -> bytes:
    """The exact bytes the producer will write for ``spec``."""
    kind, *args = spec.source
    if kind == "shell_yes":
        return shell_yes_bytes(*args)
    if kind == "custom_big":
        return big_text(*args).encode()
    if kind == "mcp_big":
        return mcp_big_text(*args).encode()
    raise ValueError(f"unknown artifact source {kind!r}")


# -- hostile identifiers --------------------------------------------------------------

_HOSTILE_IDS: Final[tuple[Callable[[str], str], ...]] = (
    lambda tag: f"../../escape-{tag}",
    lambda tag: f"../../../../../../tmp/chaos-escape-{tag}",
    lambda tag: f"/tmp/chaos-escape-{tag}",
    lambda tag: f"..\\..\\escape-{tag}",
    lambda tag: f"nul\0{tag}",
    lambda tag: "\0",
    lambda tag: "",
    lambda tag: ".",
    lambda tag: "..",
    lambda tag: "/",
    lambda tag: "x" * 5000 + tag,
    lambda tag: f"$(touch /tmp/chaos-pwn-{tag})",
    lambda tag: f"line\nbreak-{tag}",
    lambda tag: f"\u202egnp.{tag}",
    lambda tag: f"%2e%2e%2fescape-{tag}",
    lambda tag: f"a/b/../../../escape-{tag}",
    lambda tag: f"\ud83d{tag}",
)
_HOSTILE_NAMES: Final[tuple[Callable[[str], str], ...]] = (
    lambda tag: f"../../../../../../tmp/chaos-escape-{tag}",
    lambda tag: f"/tmp/chaos-escape-{tag}",
    lambda tag: "A" * 5000 + tag,
    lambda tag: f"x\0{tag}",
    lambda tag: "",
    lambda tag: "..",
    lambda tag: f"mcp__{MCP_SERVER}__../../{tag}",
)

_PNG_1PX: Final = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753"
        "de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082"
    )
).decode()


# -- the call catalogue ---------------------------------------------------------------


@dataclass(slots=True)
class _Draft:
    kind: str
    name: str
    args: dict[str, Any]
    slow: bool = False
    artifact: tuple[str, tuple[Any, ...], str] | None = None
    """(tool, source, suffix): the call's certain artifact, under its call id."""


def _shell(rng: random.Random, salt: str) -> _Draft:
    kinds = {
        "shell.fast": 10,
        "shell.nonzero": 5,
        "shell.slow": 3,
        "shell.hang": 2,
        "shell.ignore_term": 2,
        "shell.background": 3,
        "shell.background_pipe": 1,
        "shell.huge": 5,
        "shell.medium": 5,
        "shell.binary": 2,
        "shell.signal": 1,
        "shell.bad_args": 2,
    }
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    hang = {"timeout": SHELL_TIMEOUT_S}
    if kind == "shell.fast":
        return _Draft(kind, SHELL, {"command": f"echo {salt}; echo done"})
    if kind == "shell.nonzero":
        code = rng.choice([1, 2, 3, 127, 130])
        return _Draft(kind, SHELL, {"command": f"echo {salt} >&2; exit {code}"})
    if kind == "shell.slow":
        delay = rng.choice([0.1, 0.3, 0.6])
        return _Draft(kind, SHELL, {"command": f"echo {salt}; sleep {delay}; echo done"})
    if kind == "shell.hang":
        return _Draft(kind, SHELL, {"command": f"echo {salt}; sleep 30", **hang}, slow=True)
    if kind == "shell.ignore_term":
        command = f"trap '' TERM; echo {salt}; sleep 30; sleep 30"
        return _Draft(kind, SHELL, {"command": command, **hang}, slow=True)
    if kind == "shell.background":
        command = f"(sleep 30 >/dev/null 2>&1 &); sleep 30 >/dev/null 2>&1 & echo {salt}"
        return _Draft(kind, SHELL, {"command": command})
    if kind == "shell.background_pipe":
        return _Draft(kind, SHELL, {"command": f"sleep 30 & echo {salt}"}, slow=True)
    if kind == "shell.huge":
        size = rng.choice([40_000, 120_000, 600_000, 2_000_000])
        if rng.random() < 0.05:
            size = 6_000_000
        return _Draft(
            kind,
            SHELL,
            {"command": shell_yes_command(salt, size)},
            artifact=(SHELL, ("shell_yes", salt, size), ".txt"),
        )
    if kind == "shell.medium":
        size = rng.choice([1_500, 6_000, 20_000])
        return _Draft(kind, SHELL, {"command": shell_yes_command(salt, size)})
    if kind == "shell.binary":
        return _Draft(kind, SHELL, {"command": f"printf '{salt}\\000\\001\\002binary'"})
    if kind == "shell.signal":
        return _Draft(kind, SHELL, {"command": f"echo {salt}; kill -9 $$"})
    bad: dict[str, Any] = rng.choice(
        [
            {"command": ""},
            {"command": f"echo {salt}", "bogus": 1},
            {"command": f"echo {salt}", "cwd": f"/nonexistent/{salt}"},
            {"command": f"echo {salt}\0oops"},
            {"command": f"echo {salt}", "timeout": -1},
        ]
    )
    return _Draft(kind, SHELL, bad)


def _mcp(rng: random.Random, salt: str) -> _Draft:
    kinds = {
        "mcp.echo": 4,
        "mcp.large": 4,
        "mcp.medium": 3,
        "mcp.error": 3,
        "mcp.crash": 0.6,
        "mcp.slow": 2,
        "mcp.timeout": 1,
        "mcp.env": 2,
        "mcp.spawn_child": 1,
        "mcp.media": 1,
        "mcp.texts": 1,
        "mcp.surrogate": 1,
    }
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]

    def tool(name: str) -> str:
        return f"mcp__{MCP_SERVER}__{name}"

    if kind == "mcp.echo":
        return _Draft(kind, tool("echo"), {"text": f"{salt} echo"})
    if kind == "mcp.large":
        size = rng.choice([25_000, 60_000, 150_000]) + rng.randrange(1_000)
        name = tool("big_text")
        return _Draft(kind, name, {"n_chars": size}, artifact=(name, ("mcp_big", size), ".txt"))
    if kind == "mcp.medium":
        return _Draft(kind, tool("echo"), {"text": big_text(rng.choice([3_000, 12_000]), salt)})
    if kind == "mcp.error":
        return _Draft(kind, tool("fail"), {"message": f"{salt} failed on purpose"})
    if kind == "mcp.crash":
        return _Draft(kind, tool("crash"), {"exit_code": rng.choice([0, 3, 70])}, slow=True)
    if kind == "mcp.slow":
        return _Draft(kind, tool("slow"), {"seconds": rng.choice([0.1, 0.3, 0.8]), "steps": 2})
    if kind == "mcp.timeout":
        return _Draft(kind, tool("slow"), {"seconds": 4, "steps": 4}, slow=True)
    if kind == "mcp.env":
        return _Draft(kind, tool("env"), {})
    if kind == "mcp.spawn_child":
        return _Draft(kind, tool("spawn_child"), {"seconds": 20})
    if kind == "mcp.media":
        return _Draft(kind, tool(rng.choice(["image", "mixed"])), {})
    if kind == "mcp.texts":
        return _Draft(kind, tool("texts"), {"sizes": [rng.randrange(100, 4_000) for _ in range(3)]})
    return _Draft(kind, tool("lone_surrogate"), {})


def _custom(rng: random.Random, salt: str) -> _Draft:
    kinds = {
        "custom.echo": 4,
        "custom.big": 4,
        "custom.medium": 3,
        "custom.raise": 3,
        "custom.hang": 2,
        "custom.hang_sync": 1,
        "custom.weird": 2,
        "custom.surrogate_args": 1,
        "custom.media": 1,
        "custom.bad_return": 1,
        "custom.dotted_name": 1,
        "custom.bad_args": 1,
    }
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    if kind == "custom.echo":
        return _Draft(kind, "chaos_echo", {"text": f"{salt} custom echo"})
    if kind == "custom.big":
        size = rng.choice([9_000, 40_000, 250_000]) + rng.randrange(1_000)
        return _Draft(
            kind,
            "chaos_big",
            {"n_chars": size, "salt": salt},
            artifact=("chaos_big", ("custom_big", size, salt), ".txt"),
        )
    if kind == "custom.medium":
        return _Draft(kind, "chaos_echo", {"text": big_text(rng.choice([2_500, 15_000]), salt)})
    if kind == "custom.raise":
        return _Draft(kind, "chaos_raise", {"message": f"{salt} raised on purpose"})
    if kind == "custom.hang":
        return _Draft(kind, "chaos_hang", {"seconds": 30}, slow=True)
    if kind == "custom.hang_sync":
        return _Draft(kind, "chaos_hang_sync", {"seconds": 2}, slow=True)
    if kind == "custom.weird":
        return _Draft(kind, "chaos_weird", {"salt": salt, "repeat": rng.choice([1, 50, 2_000])})
    if kind == "custom.surrogate_args":
        return _Draft(kind, "chaos_echo", {"text": f"{salt} model sent a lone \ud83d surrogate"})
    if kind == "custom.media":
        return _Draft(kind, "chaos_media", {"salt": salt, "data": _PNG_1PX})
    if kind == "custom.bad_return":
        return _Draft(kind, "chaos_bad_return", {})
    if kind == "custom.dotted_name":
        return _Draft(kind, "_.._.._chaos", {"salt": salt})
    return _Draft(kind, "chaos_big", {"n_chars": "many", "salt": salt})


def _producing(rng: random.Random, salt: str) -> _Draft:
    """A call certain to persist an artifact under its call id (for hostile ids)."""
    while True:
        draft = rng.choice([_shell, _mcp, _custom])(rng, salt)
        if draft.artifact is not None:
            return draft


# -- one batch --------------------------------------------------------------------------


def _budget(rng: random.Random) -> int | None:
    band = rng.choices(
        ["tiny", "small", "medium", "default", "large", "none"], weights=[15, 25, 30, 15, 10, 5]
    )[0]
    if band == "tiny":
        return rng.choice([1, 2, 7, 16, 40, 100])
    if band == "small":
        return rng.randrange(200, 3_000)
    if band == "medium":
        return rng.randrange(3_000, 60_000)
    if band == "default":
        return 200_000
    if band == "large":
        return 1_000_000
    return None


def plan_batch(seed: int, index: int) -> BatchPlan:
    """The plan of batch ``index`` of the campaign seeded with ``seed``."""
    rng = random.Random(f"toolbatch-chaos:{seed}:{index}")
    salt = f"s{seed}b{index}"
    faults: Counter[str] = Counter()
    count = rng.choices(range(1, 11), weights=[8, 10, 12, 12, 12, 10, 8, 6, 4, 3])[0]
    drafts: list[tuple[_Draft, str]] = []
    slow = 0
    while len(drafts) < count:
        call_salt = f"{salt}c{len(drafts)}"
        family = rng.choices(["shell", "mcp", "custom", "special"], weights=[38, 24, 24, 14])[0]
        special: str | None = None
        if family == "shell":
            draft = _shell(rng, call_salt)
        elif family == "mcp":
            draft = _mcp(rng, call_salt)
        elif family == "custom":
            draft = _custom(rng, call_salt)
        else:
            special = rng.choices(
                ["unknown", "duplicate", "malformed", "hostile_id", "hostile_name"],
                weights=[3, 3, 1, 3, 2],
            )[0]
            if special == "duplicate" and not drafts:
                special = "unknown"
            if special == "hostile_id":
                draft = _producing(rng, call_salt)
            else:
                draft = _Draft(special, "", {})
        if draft.slow and slow >= 2:
            continue  # keep batches short: at most two calls that take a second
        slow += draft.slow
        if special is not None:
            draft.kind = special if special != "hostile_id" else f"hostile_id+{draft.kind}"
        drafts.append((draft, call_salt))
    # Issue 14's faults draw from their own generator, so every earlier draw (and with it
    # each seed's plans before them) stays as it was.
    extra = random.Random(f"toolbatch-chaos-14:{seed}:{index}")
    if extra.random() < 0.15:
        exit_salt = f"{salt}c{len(drafts)}"
        code = extra.choice([0, 2, "usage: chaos_exit [-h]"])
        drafts.append((_Draft("custom.sys_exit", "chaos_exit", {"code": code}), exit_salt))
    # Issue 29's hostile media draw from their own generator too.
    hostile = random.Random(f"toolbatch-chaos-29:{seed}:{index}")
    if hostile.random() < 0.12:
        media_salt = f"{salt}c{len(drafts)}"
        kind = hostile.choice(HOSTILE_MEDIA_KINDS)
        args = {"kind": kind, "salt": media_salt}
        drafts.append((_Draft(f"media.{kind}", "chaos_hostile_media", args), media_salt))

    raws: list[Any] = []
    for draft, call_salt in drafts:
        call_id = f"{call_salt}-{draft.kind.split('+')[-1].replace('.', '_')}"
        if draft.kind == "unknown":
            raws.append({"id": call_id, "name": f"no_such_tool_{call_salt}", "args": {}})
        elif draft.kind == "hostile_name":
            name = rng.choice(_HOSTILE_NAMES)(call_salt)
            raws.append({"id": call_id, "name": name, "args": {"x": call_salt}})
        elif draft.kind == "duplicate":
            earlier = rng.choice([raw for raw in raws if isinstance(raw, dict)] or [None])
            if earlier is None or not isinstance(earlier.get("id"), str):
                draft.kind = "unknown"
                raws.append({"id": call_id, "name": f"no_such_tool_{call_salt}", "args": {}})
            else:
                raws.append({"id": earlier["id"], "name": "chaos_echo", "args": {"text": "dup"}})
        elif draft.kind == "malformed":
            raws.append(
                rng.choice(
                    [
                        {"id": call_id, "name": "chaos_echo", "args": "not an object"},
                        {"id": 17, "name": None},
                        {"name": "chaos_echo"},
                        f"garbage {call_salt}",
                        {"id": call_id, "name": "chaos_echo", "args": {}, "extra": True},
                    ]
                )
            )
        else:
            if draft.kind.startswith("hostile_id"):
                call_id = rng.choice(_HOSTILE_IDS)(call_salt)
            raws.append({"id": call_id, "name": draft.name, "args": draft.args})
        faults[draft.kind.split("+")[0]] += 1
        if "+" in draft.kind:
            faults[draft.kind.split("+")[1]] += 1

    shuffled = rng.random() < 0.2
    if shuffled:
        ordinals = list(range(len(raws)))
        rng.shuffle(ordinals)
        for raw, ordinal in zip(raws, ordinals, strict=True):
            if isinstance(raw, dict):
                raw["ordinal"] = ordinal
        faults["shuffled_ordinals"] += 1

    calls = _expectations(drafts, raws)

    eacces = 0
    disk_full = False
    disk_free = 0
    fallback_small = False
    symlinks = False
    store_fault = rng.choices(
        ["none", "eacces", "disk_full", "symlink", "eacces+symlink"], weights=[62, 12, 10, 11, 5]
    )[0]
    if "eacces" in store_fault:
        eacces = rng.choice([30, 60, 100])
        faults["store.eacces"] += 1
    if store_fault == "disk_full":
        disk_full = True
        disk_free = rng.choice([0, 16_384, 262_144])
        fallback_small = rng.random() < 0.5
        faults["store.disk_full"] += 1
    if "symlink" in store_fault and any(call.artifact is not None for call in calls):
        symlinks = True
        faults["store.symlink"] += 1

    hooks: tuple[str, ...] = ()
    if rng.random() < 0.35:
        hooks = tuple(rng.sample(HOOK_KINDS, rng.choice([1, 1, 2, 3])))
        for kind in hooks:
            faults[f"hook.{kind}"] += 1

    abort_after = None
    hard_cancel = None
    roll = rng.random()
    if roll < 0.12:
        abort_after = round(rng.uniform(0.0, 1.5), 3)
        faults["abort"] += 1
    elif roll < 0.15:
        hard_cancel = round(rng.uniform(0.05, 1.5), 3)
        faults["hard_cancel"] += 1

    budget = _budget(rng)
    faults["budget.none" if budget is None else f"budget.{_budget_band(budget)}"] += 1
    recorder_free: int | None = None
    if not disk_full and extra.random() < 0.12:
        recorder_free = extra.choice([0, 1_024, 6_000])
        faults["recorder.full_disk"] += 1
    hijacked: Literal["other-owner", "world-writable", "symlink"] | None = None
    if not disk_full and not eacces and extra.random() < 0.1:
        hijacked = extra.choice(["other-owner", "world-writable", "symlink"])
        faults["store.hijacked_fallback"] += 1
    disk_delay: Literal["slow", "hanging"] | None = None
    delays = random.Random(f"toolbatch-chaos-29:{seed}:{index}")
    if not disk_full and not eacces and hijacked is None and delays.random() < 0.1:
        disk_delay = delays.choice(["slow", "hanging"])
        faults[f"store.{disk_delay}_disk"] += 1
    recording_symlinked = recorder_free is None and delays.random() < 0.08
    if recording_symlinked:
        faults["recorder.symlinked"] += 1
    return BatchPlan(
        index=index,
        salt=salt,
        calls=tuple(calls),
        budget=budget,
        concurrency=rng.choice([2, 4, 6, 10]),
        call_timeout=rng.choice([2.0, 3.0]),
        hooks=hooks,
        eacces_percent=eacces,
        disk_full=disk_full,
        disk_free_bytes=disk_free,
        fallback_on_small_fs=fallback_small,
        symlinks=symlinks,
        abort_after_s=abort_after,
        hard_cancel_after_s=hard_cancel,
        shuffled=shuffled,
        recorder_free_bytes=recorder_free,
        hijacked_fallback=hijacked,
        disk_delay=disk_delay,
        recording_symlinked=recording_symlinked,
        faults=faults,
    )


def _budget_band(budget: int) -> str:
    if budget <= 100:
        return "tiny"
    if budget < 3_000:
        return "small"
    if budget < 200_000:
        return "medium"
    return "large"


def _expectations(drafts: Sequence[tuple[_Draft, str]], raws: Sequence[Any]) -> list[CallSpec]:
    """Each call's expected response, by the scheduler's documented rules.

    Malformed calls are answered in place under their id (or ``invalid-call-<position>``);
    a repeated id is a duplicate, in list order; responses go in ordinal order (a call's
    position when it has none), ties in list order.
    """
    seen: set[str] = set()
    specs: list[CallSpec] = []
    for index, ((draft, _), raw) in enumerate(zip(drafts, raws, strict=True)):
        expect: Expect
        if draft.kind == "malformed" or not isinstance(raw, dict) or "extra" in raw:
            raw_id = raw.get("id") if isinstance(raw, dict) else None
            raw_name = raw.get("name") if isinstance(raw, dict) else None
            call_id = raw_id if isinstance(raw_id, str) and raw_id else f"invalid-call-{index}"
            name = raw_name if isinstance(raw_name, str) and raw_name else "invalid_call"
            expect = "invalid"
            ordinal = index
        else:
            call_id = raw["id"]
            name = raw["name"]
            ordinal = raw.get("ordinal", index)
            if call_id in seen:
                expect = "duplicate"
            elif draft.kind in ("unknown", "hostile_name"):
                expect = "unknown"
            else:
                expect = "run"
        artifact = None
        if expect == "run" and draft.artifact is not None:
            tool, source, suffix = draft.artifact
            artifact = ArtifactSpec(persist_id=call_id, tool=tool, source=source, suffix=suffix)
        seen.add(call_id)
        specs.append(
            CallSpec(
                kind=draft.kind,
                raw=raw,
                id=call_id,
                name=name,
                expect=expect,
                sort_key=(ordinal, index),
                slow=draft.slow,
                artifact=artifact,
            )
        )
    return specs


def fault_kinds(plan: BatchPlan) -> frozenset[str]:
    """The fault and behaviour kinds a plan injects."""
    return frozenset(kind for kind, count in plan.faults.items() if count > 0)


def _batch_cost(plan: BatchPlan) -> float:
    """A rough price of running a batch: its calls, and seconds of slow or hanging disk."""
    return 1 + len(plan.calls) / 4 + (12 if plan.disk_delay else 0) + bool(plan.hard_cancel_after_s)


def covering_batches(seed: int, *, search: int) -> tuple[int, ...]:
    """Cheap batch numbers below ``search`` whose plans inject every kind the first
    ``search`` plans inject, in increasing order.

    Greedy weighted set cover: the batch adding the most kinds not yet covered per unit of
    cost (a slow or hanging disk costs as much as 48 calls, so one batch brings each). For
    seed 24, 22 of the first 500 batches (85 calls) inject all of their 80 kinds, where the
    first 50 batches (245 calls) inject 71. Plans are pure, so this costs planning only.
    """
    if search < 1:
        raise ValueError(f"search must be at least 1 batch, got {search!r}")
    plans = [plan_batch(seed, index) for index in range(search)]
    left = set().union(*(fault_kinds(plan) for plan in plans))
    chosen: list[int] = []
    while left:
        best = max(
            plans,
            key=lambda plan: (len(left & fault_kinds(plan)) / _batch_cost(plan), -plan.index),
        )
        chosen.append(best.index)
        left -= fault_kinds(best)
    return tuple(sorted(chosen))


def plan_digest(plans: Sequence[BatchPlan]) -> str:
    """A short digest of plans, to show that a seed reproduces the same campaign."""
    hasher = hashlib.sha256()
    for plan in plans:
        record = [
            plan.index,
            [repr(call.raw) for call in plan.calls],
            plan.budget,
            plan.concurrency,
            plan.call_timeout,
            plan.hooks,
            plan.eacces_percent,
            plan.disk_full,
            plan.disk_free_bytes,
            plan.fallback_on_small_fs,
            plan.disk_delay,
            plan.recording_symlinked,
            plan.symlinks,
            plan.abort_after_s,
            plan.hard_cancel_after_s,
        ]
        hasher.update(json.dumps(record, ensure_ascii=True).encode())
    return hasher.hexdigest()[:16]
