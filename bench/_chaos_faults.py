"""The chaos campaign's faults and tools: a failing artifact store, planted symlinks, a full
disk, custom tools that misbehave, and PostToolBatch hooks (Python and command) that do.

Fault injection, and why it is honest:

* Permission denied. The campaign runs as root, which ignores file modes, so a primary
  directory cannot be made unwritable with ``chmod``. ``ChaosStore`` instead sends a seeded
  share of its primary-directory writes to ``/sys/kernel``, where the kernel refuses to
  create files with a real ``EACCES`` even for root; the library's own fallback code then
  handles a real ``PermissionError``. Both write paths are covered: one-shot ``persist``
  (``ArtifactStore._put``) and streams (``ArtifactStream._create_file``). Without that kernel
  behaviour the fault is skipped and the table says so.
* Disk full. A real 32 MiB tmpfs (root only), filled up to a seeded amount of free space
  before the batch: ``ENOSPC`` comes from the kernel.
* Symlinks. Planted at the exact names the store will write, computed with the store's own
  ``artifact_name`` and digest from the output each call is certain to produce; each points
  at a victim file outside the artifact directories whose content is checked afterwards.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio
from pydantic import JsonValue

from bench._chaos_checks import hook_input_chars, model_json
from bench._chaos_plan import CUSTOM_BIG_THRESHOLD_CHARS, BatchPlan, artifact_bytes, big_text
from toolbatch import (
    ArtifactStore,
    ArtifactStream,
    FileData,
    FileDataPart,
    FunctionResponse,
    FunctionResponsePart,
    InlineData,
    InlineDataPart,
    Part,
    Registry,
    TextPart,
    ToolCall,
    ToolCallResponse,
    default_registry,
    tool,
)
from toolbatch.artifacts._store import _digest_prefix
from toolbatch.hooks import CommandHook, PostToolBatchInput, PostToolBatchOutput
from toolbatch.producers import ProducerContext, ToolDeclaration

__all__ = [
    "DENIED_DIR",
    "HOOK_SCRIPT",
    "ChaosStore",
    "HookProbe",
    "Planted",
    "SmallDisk",
    "build_hooks",
    "build_registry",
    "eacces_is_real",
    "plant_symlinks",
]

DENIED_DIR: Final = Path("/sys/kernel")
"""sysfs refuses to create files here with EACCES, even for root."""
HOOK_SCRIPT: Final = Path(__file__).with_name("_chaos_hook.py")
PY_HOOK_TIMEOUT_S: Final = 0.3
CMD_HOOK_TIMEOUT_S: Final = 0.5
"""A little above the Python hooks': the command hook's interpreter must start in it."""
SMALL_DISK_BYTES: Final = 32 * 2**20
"""Room for any turn the plan makes (a 6 MB output with no budget, records of a few MB):
the faults fill it to what they leave free, and once the filler is gone the retried append
must fit. At 1 MiB a large turn could never be recorded there (seed 1, batch 361)."""
VICTIM_BYTES: Final = b"victim: an artifact write must never reach this file\n"


def eacces_is_real() -> bool:
    """Whether creating a file in ``DENIED_DIR`` fails with EACCES here."""
    try:
        fd, path = tempfile.mkstemp(dir=DENIED_DIR)
    except PermissionError as exc:
        return exc.errno == errno.EACCES
    except OSError:
        return False
    os.close(fd)
    os.unlink(path)
    return False


# -- the artifact store ---------------------------------------------------------------


class ChaosStore(ArtifactStore):
    """An ``ArtifactStore`` whose primary-directory writes fail at random with EACCES.

    It also remembers which call id and tool each returned path was written for, so the
    campaign can tell the same output written twice from two outputs.

    Args:
        deny_percent: the share of primary writes to refuse (0 to 100).
        deny_seed: seeds which writes are refused (by call id, tool and suffix).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fallback_dir: str | os.PathLike[str],
        deny_percent: int = 0,
        deny_seed: str = "",
    ) -> None:
        self._thread = threading.local()
        self._deny_percent = deny_percent
        self._deny_seed = deny_seed
        self.denied = 0
        self._denied_lock = threading.Lock()
        self.owners: dict[Path, tuple[str, str]] = {}
        self.fsync_delay_s = 0.0
        self.disk_back = threading.Event()
        """Cleared for a hanging disk: every fsync waits for it (set once the batch ends)."""
        self.disk_back.set()
        super().__init__(root, fallback_dir=fallback_dir)

    def sync_file(self, fd: int) -> None:
        self._slow_disk()
        super().sync_file(fd)

    def sync_directory(self, directory: Path) -> None:
        self._slow_disk()
        super().sync_directory(directory)

    def _slow_disk(self) -> None:
        self.disk_back.wait()
        if self.fsync_delay_s:
            threading.Event().wait(self.fsync_delay_s)

    # ``root`` is the real primary directory, except inside a stream's ``_create_file``
    # chosen to fail: there, on that worker thread only, it is ``DENIED_DIR``.
    @property
    def root(self) -> Path:
        redirected: Path | None = getattr(self._thread, "root", None)
        return redirected if redirected is not None else self._root

    @root.setter
    def root(self, value: Path) -> None:
        self._root = value

    @property
    def primary(self) -> Path:
        """The real primary directory."""
        return self._root

    def deny(self, key: str) -> bool:
        """Whether the primary write identified by ``key`` is refused (seeded)."""
        if self._deny_percent <= 0:
            return False
        digest = hashlib.sha256(f"{self._deny_seed}\0{key}".encode("utf-8", "surrogatepass"))
        refused = int.from_bytes(digest.digest()[:4], "big") % 100 < self._deny_percent
        with self._denied_lock:  # one-shot writes ask from worker threads
            self.denied += refused
        return refused

    async def persist(self, call_id: str, tool_name: str, text: str) -> Path:
        path = await super().persist(call_id, tool_name, text)
        self.owners.setdefault(path, (call_id, tool_name))
        return path

    async def persist_bytes(
        self, call_id: str, tool_name: str, data: bytes, *, suffix: str = ".bin"
    ) -> Path:
        path = await super().persist_bytes(call_id, tool_name, data, suffix=suffix)
        self.owners.setdefault(path, (call_id, tool_name))
        return path

    async def _put(self, directory: Path, job: Any) -> Path | None:
        key = f"{job.call_id}\0{job.tool_name}\0{job.suffix}"
        if directory == self._root and self.deny(key):
            return await super()._put(DENIED_DIR, job)
        return await super()._put(directory, job)


class _ChaosStream(ArtifactStream):
    __slots__ = ()

    def _create_file(self) -> Any:
        store = self.store
        assert isinstance(store, ChaosStore)
        if not store.deny(f"stream\0{self.call_id}\0{self.tool_name}"):
            return super()._create_file()
        store._thread.root = DENIED_DIR
        try:
            return super()._create_file()
        finally:
            store._thread.root = None

    async def commit(self) -> Path:
        path = await super().commit()
        store = self.store
        assert isinstance(store, ChaosStore)
        store.owners.setdefault(path, (self.call_id, self.tool_name))
        return path


ChaosStore.stream_class = _ChaosStream


@dataclass(frozen=True, slots=True)
class Planted:
    """A symlink planted where an artifact will be written, and the file it points to."""

    link: Path
    victim: Path


def plant_symlinks(store: ChaosStore, plan: BatchPlan, victims: Path) -> list[Planted]:
    """Plant a symlink at each certain artifact's exact name, in both directories."""
    planted: list[Planted] = []
    for number, call in enumerate(plan.calls):
        spec = call.artifact
        if spec is None:
            continue
        hasher = _digest_prefix(spec.persist_id)
        hasher.update(artifact_bytes(spec))
        name = store.artifact_name(spec.persist_id, spec.tool, hasher.hexdigest(), spec.suffix)
        for directory in (store.primary, store.fallback_dir):
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            victim = victims / f"b{plan.index}-c{number}-{len(planted)}"
            victim.write_bytes(VICTIM_BYTES)
            link = directory / name
            if not os.path.lexists(link):
                link.symlink_to(victim)
                planted.append(Planted(link, victim))
    return planted


# -- a full disk ----------------------------------------------------------------------


class SmallDisk:
    """A real 32 MiB tmpfs, mounted for the campaign (root only)."""

    def __init__(self, mount_point: Path) -> None:
        self.mount_point = mount_point
        self.filler = mount_point / "filler"
        self.mounted = False
        self.problem: str | None = None

    def mount(self) -> bool:
        """Mount it; ``False`` (with ``problem`` set) when this machine cannot."""
        if os.geteuid() != 0:
            self.problem = "mounting a tmpfs needs root"
            return False
        self.mount_point.mkdir(mode=0o700, parents=True, exist_ok=True)
        done = subprocess.run(
            [
                "mount",
                "-t",
                "tmpfs",
                "-o",
                f"size={SMALL_DISK_BYTES},mode=0700",
                "tmpfs",
                str(self.mount_point),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            self.problem = f"mount failed: {done.stderr.strip()}"
            return False
        self.mounted = True
        return True

    def fill(self, leave_bytes: int) -> None:
        """Fill the disk until about ``leave_bytes`` are free."""
        info = os.statvfs(self.mount_point)
        room = info.f_bavail * info.f_frsize - leave_bytes
        if room <= 0:
            return
        with contextlib.suppress(OSError), open(self.filler, "ab") as file:
            file.write(b"\0" * room)

    def clear(self) -> None:
        """Remove everything on it."""
        for entry in self.mount_point.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.mount_point)], check=False)
            self.mounted = False


# -- custom tools ---------------------------------------------------------------------


@tool(output_threshold=None)
async def chaos_echo(text: str) -> str:
    """Return the text."""
    return text


@tool(output_threshold=CUSTOM_BIG_THRESHOLD_CHARS)
async def chaos_big(n_chars: int, salt: str) -> str:
    """Return n_chars characters of lines starting with the salt."""
    return big_text(n_chars, salt)


@tool
def chaos_exit(code: int | str) -> str:
    """Exit the process, as a script's argparse error would (issue 14: it must not)."""
    sys.exit(code)


@tool
async def chaos_raise(message: str) -> str:
    """Raise an exception."""
    raise RuntimeError(message)


@tool(timeout_s=0.5)
async def chaos_hang(seconds: float) -> str:
    """Sleep far past the tool's own timeout."""
    await anyio.sleep(seconds)
    return "woke up"


@tool(timeout_s=0.5, output_threshold=None)
def chaos_hang_sync(seconds: float, context: ProducerContext) -> str:
    """Block a worker thread past the timeout, stopping soon once told it was cancelled."""
    deadline = time.monotonic() + min(seconds, 3.0)
    while time.monotonic() < deadline:
        if context.cancelled.is_set():
            return "noticed the cancellation"
        time.sleep(0.02)
    return "finished"


@tool(output_threshold=None)
async def chaos_weird(salt: str, repeat: int) -> str:
    """Return text full of lone surrogates, NUL, bidi controls and line separators."""
    line = (
        f"{salt} lone \ud83d high, lone \udc00 low, NUL \0, RTL \u202e, LS \u2028 PS \u2029, "
        f"pair \U0001f600, e\u0301\n"
    )
    return line * max(1, min(repeat, 5_000))


@tool
async def chaos_media(salt: str, data: str) -> list[Part]:
    """Return a text part and an image."""
    image = InlineDataPart(inline_data=InlineData(mime_type="image/png", data=data))
    return [TextPart(text=f"{salt} picture"), image]


def _png_bytes() -> bytes:
    """A valid 2 x 2 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
    pixels = chunk(b"IDAT", zlib.compress(b"\0\x80\x80\x80\x80\x80\x80" * 2))
    return b"\x89PNG\r\n\x1a\n" + header + pixels + chunk(b"IEND", b"")


def _inline(mime: str, data: bytes) -> InlineDataPart:
    return InlineDataPart(
        inline_data=InlineData(mime_type=mime, data=base64.b64encode(data).decode())
    )


@tool
async def chaos_hostile_media(kind: str, salt: str) -> list[Part]:
    """Media built to pass a signature check, or to carry text in its strings (issue 29)."""
    text = f"{salt} not media, text. ".encode() * 30_000  # about 900 KB
    long = salt * (2_000_000 // len(salt))
    part: Part
    if kind == "png_then_text":
        part = _inline("image/png", b"\x89PNG\r\n\x1a\n" + text)
    elif kind == "png_with_text_tail":
        part = _inline("image/png", _png_bytes() + text)
    elif kind == "bm_text":
        part = _inline("image/bmp", b"BM" + text)
    elif kind == "id3_text":
        part = _inline("audio/mpeg", b"ID3" + text)
    elif kind == "long_mime":
        part = _inline("image/png" + long, _png_bytes())
    elif kind == "long_uri":
        part = FileDataPart(file_data=FileData(mime_type="image/png", file_uri="gs://b/" + long))
    else:  # long_file_mime
        mime = "image/png;x=" + long
        part = FileDataPart(file_data=FileData(mime_type=mime, file_uri=f"gs://b/{salt}.png"))
    return [TextPart(text=f"{salt} hostile media ({kind})"), part]


@tool(name="_.._.._chaos", output_threshold=100)
async def dotted_name(salt: str) -> str:
    """A tool whose legal name is full of dots; its output is persisted."""
    return f"{salt} dotted " * 40


class BadReturnProducer:
    """A producer that returns something other than a ToolResult."""

    declaration = ToolDeclaration(name="chaos_bad_return", description="Return garbage.")

    async def run(self, call: ToolCall, context: ProducerContext) -> Any:
        return {"not": "a ToolResult", "call": call.id}


def build_registry(extra: Sequence[object]) -> Registry:
    """The shell producer with short timeouts, the custom tools, and ``extra`` producers."""
    registry = default_registry(
        kill_grace_s=0.2, drain_s=0.2, default_timeout_s=1.5, max_timeout_s=3.0
    )
    for item in (
        chaos_echo,
        chaos_big,
        chaos_raise,
        chaos_exit,
        chaos_hang,
        chaos_hang_sync,
        chaos_weird,
        chaos_media,
        chaos_hostile_media,
        dotted_name,
        BadReturnProducer(),
        *extra,
    ):
        registry.register(item)
    return registry


# -- hooks ----------------------------------------------------------------------------


@dataclass(slots=True)
class HookProbe:
    """What the Python hooks of one batch saw and did."""

    inputs: list[str] = field(default_factory=list)
    input_chars: list[int] = field(default_factory=list)
    injected_into: list[str] = field(default_factory=list)


def _seeded(salt: str, kind: str, modulo: int) -> int:
    digest = hashlib.sha256(f"{salt}\0{kind}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % modulo


def build_hooks(
    plan: BatchPlan,
    probe: HookProbe,
    *,
    inject_path: Path,
    report_dir: Path,
    hook_env: dict[str, str],
) -> list[Any]:
    """The batch's hooks: an observer first, then one per planned kind."""

    async def observe(batch: PostToolBatchInput) -> None:
        probe.inputs.append(model_json(batch))
        probe.input_chars.append(hook_input_chars(batch.model_dump(mode="json")))

    hooks: list[Any] = [observe]
    for kind in plan.hooks:
        family, mode = kind.split(".")
        if family == "cmd":
            hooks.append(
                CommandHook(
                    [sys.executable, "-I", "-S", str(HOOK_SCRIPT), mode],
                    timeout=CMD_HOOK_TIMEOUT_S,
                    env={**hook_env, "CHAOS_HOOK_DIR": str(report_dir)},
                )
            )
        else:
            hooks.append(_python_hook(mode, plan.salt, probe, inject_path))
    return hooks


def _python_hook(mode: str, salt: str, probe: HookProbe, inject_path: Path) -> Any:
    async def crash(batch: PostToolBatchInput) -> None:
        raise RuntimeError(f"{salt} hook crashed on purpose")

    async def hang(batch: PostToolBatchInput) -> None:
        await anyio.sleep(30)

    async def garbage(batch: PostToolBatchInput) -> Any:
        return [42, {"replace": "not a mapping"}, "garbage"][_seeded(salt, "garbage", 3)]

    async def stop(batch: PostToolBatchInput) -> PostToolBatchOutput:
        return PostToolBatchOutput(stop=True, stop_reason=f"{salt} stopped by a chaos hook")

    async def context(batch: PostToolBatchInput) -> PostToolBatchOutput:
        size = _seeded(salt, "context", 60_000)
        text = (f"{salt} hook context " * (size // 20 + 1))[:size]
        return PostToolBatchOutput(additional_context=text)

    async def inject(batch: PostToolBatchInput) -> PostToolBatchOutput | None:
        target = next((call for call in batch.tool_calls if call.status == "success"), None)
        if target is None:
            return None
        size = 500 + _seeded(salt, "inject", 40_000)
        text = (f"{salt} replaced by a hook\n" * (size // 20 + 1))[:size]
        body: dict[str, JsonValue] = {"output": text}
        replacement = ToolCallResponse(
            call_id=target.tool_use_id,
            name=target.tool_name,
            parts=[
                FunctionResponsePart(
                    function_response=FunctionResponse(
                        id=target.tool_use_id, name=target.tool_name, response=body
                    )
                )
            ],
            persisted_output_files=(inject_path,),
        )
        probe.injected_into.append(target.tool_use_id)
        return PostToolBatchOutput(replace={target.tool_use_id: replacement})

    hooks = {
        "crash": crash,
        "hang": hang,
        "garbage": garbage,
        "stop": stop,
        "context": context,
        "inject": inject,
    }
    return hooks[mode]
