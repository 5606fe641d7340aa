"""The artifact store: the only code that writes tool output to disk.

``ArtifactStore`` persists a call's complete output once (durably: data fsync, rename,
directory fsync) and streams a command's output into one file; ``persist_within`` and
``commit_within`` wait for it no later than a deadline; ``WriteSlot`` is one of a pass's
concurrent writes, freed as soon as its file has its name; the artifact home
(``artifact_session``, ``list_sessions``, ``remove_sessions``) is where sessions live.
"""

from toolbatch.artifacts._deadline import (
    DEFAULT_PERSIST_TIMEOUT_S as DEFAULT_PERSIST_TIMEOUT_S,
    PERSIST_RESERVE_S as PERSIST_RESERVE_S,
    commit_within,
    persist_deadline as persist_deadline,
    persist_within,
)
from toolbatch.artifacts._home import (
    SESSION_MAX_AGE_S as SESSION_MAX_AGE_S,
    artifact_session as artifact_session,
    list_sessions as list_sessions,
    new_session_id as new_session_id,
    remove_sessions as remove_sessions,
    sessions_dir as sessions_dir,
)
from toolbatch.artifacts._store import (
    DEFAULT_MAX_FILE_BYTES as DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_TOTAL_BYTES as DEFAULT_MAX_TOTAL_BYTES,
    ArtifactStore,
    ArtifactStream as ArtifactStream,
    safe_name_component as safe_name_component,
)
from toolbatch.artifacts._workers import WriteSlot

__all__ = [
    "ArtifactStore",
    "WriteSlot",
    "commit_within",
    "persist_within",
]
