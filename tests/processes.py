"""What the tests ask the kernel about other processes, in one place.

A process can exit between opening its ``/proc`` entry and reading it: the read then fails
with ``ESRCH`` (``ProcessLookupError``), not ``ENOENT``. Every reader here treats any
``OSError`` as "gone".
"""

from __future__ import annotations

from pathlib import Path


def process_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (``R``, ``S``, ``Z``...), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] if fields else None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, already dead but not reaped, does not count)."""
    state = process_state(pid)
    return state is not None and state != "Z"
