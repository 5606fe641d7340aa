"""What the host runs is what the user configured: fingerprints of hook and server scripts.

A command hook or a stdio MCP server is started by the host, outside every sandbox, from a
command line the user wrote. If that command line runs a file the model's commands can
write (``bash .claude/hooks/guard.sh``, ``python server.py``), a command could change what
the host runs next. So the files a command line runs are fingerprinted when the hook or
server is set up (SHA-256, size, device, inode, modification and change times), and checked
before each run or (re)start: a file that changed is refused, naming the file and what
changed. This holds in every sandbox mode, ``off`` included; the sandbox's protected paths
(``toolbatch.sandbox._policy``) also keep these files read-only.

"The files a command line runs": its first word resolved on ``PATH`` (or against ``cwd``),
and every other argument that names an existing file; for ``sh -c '<line>'`` (and bash,
dash, zsh) the same for the words of ``<line>``, with ``$VAR`` and ``${VAR}`` filled in from
the environment the command gets (``"$CLAUDE_PROJECT_DIR"/.claude/hooks/x.sh``). Files of
the system (``/usr``, ``/bin``, ``/sbin``, ``/lib*``, ``/etc``) are left out: no sandboxed
command can write them, and interpreters are large to hash.

The check costs one ``stat`` per file; the content is hashed again only when the ``stat``
differs (the change time moves on every write and cannot be set back by a user).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

__all__ = ["ScriptPins", "command_scripts"]

log = structlog.get_logger("toolbatch.sandbox")

SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
SYSTEM_PREFIXES: Final = ("/usr/", "/bin/", "/sbin/", "/lib", "/etc/")
"""Where the system's own files live: not pinned (see the module docstring)."""
_VARIABLE: Final = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_HASH_CHUNK_BYTES: Final = 1 * 2**20


def _expand(text: str, env: Mapping[str, str]) -> str:
    return _VARIABLE.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), text)


def _resolve(word: str, *, cwd: Path, path_var: str | None, first: bool) -> Path | None:
    if not word or "\0" in word:
        return None
    if first and "/" not in word:
        found = shutil.which(word, path=path_var)
        return Path(found).resolve() if found is not None else None
    candidate = Path(word).expanduser()
    if not candidate.is_absolute():
        candidate = cwd / candidate
    try:
        return candidate.resolve() if candidate.is_file() else None
    except OSError:
        return None


def command_scripts(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Path, ...]:
    """The files ``argv`` runs that are worth pinning (see the module docstring)."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    variables = {**os.environ, **(env or {})}
    path_var = variables.get("PATH")
    lines: list[list[str]] = [list(argv)]
    if len(argv) >= 3 and os.path.basename(argv[0]) in SHELLS and argv[1] == "-c":
        try:
            lines.append(shlex.split(_expand(argv[2], variables), comments=True))
        except ValueError:
            log.debug("sandbox.pin_unparsed", command=argv[2][:200])
    found: list[Path] = []
    for words in lines:
        for index, word in enumerate(words):
            path = _resolve(word, cwd=base, path_var=path_var, first=index == 0)
            if path is not None and not str(path).startswith(SYSTEM_PREFIXES):
                found.append(path)
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True, slots=True)
class _Pin:
    path: Path
    stat: tuple[int, int, int, int, int]
    """device, inode, size, modification and change time (ns)."""
    sha256: str


def _stat(path: Path) -> tuple[int, int, int, int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class ScriptPins:
    """The fingerprints of the files a command line runs, taken when it was set up.

    Build with :meth:`of`; :meth:`changed` says whether one of them changed since.
    """

    pins: tuple[_Pin, ...] = ()

    @classmethod
    def of(
        cls,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ScriptPins:
        """Fingerprint the files ``argv`` runs, now (a file that cannot be read is skipped:
        starting the command will say what is wrong with it)."""
        pins = []
        for path in command_scripts(argv, cwd=cwd, env=env):
            try:
                pins.append(_Pin(path, _stat(path), _digest(path)))
            except OSError:
                continue
        return cls(tuple(pins))

    @property
    def paths(self) -> tuple[Path, ...]:
        """The pinned files."""
        return tuple(pin.path for pin in self.pins)

    def changed(self) -> str | None:
        """Why the command must not run (a pinned file changed or went away), else ``None``."""
        for pin in self.pins:
            try:
                now = _stat(pin.path)
            except OSError as exc:
                return f"{str(pin.path)!r} is gone since the session opened ({exc.strerror})"
            if now == pin.stat:
                continue
            try:
                digest = _digest(pin.path)
            except OSError as exc:
                return f"{str(pin.path)!r} can no longer be read ({exc.strerror})"
            if digest != pin.sha256:
                return (
                    f"{str(pin.path)!r} changed since the session opened (its content is not "
                    f"what was configured; a command may have rewritten it); check it and "
                    f"start a new session to use it"
                )
        return None
