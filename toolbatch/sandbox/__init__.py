"""Where a shell command runs: the sandbox policy, its namespaces (bubblewrap) and Landlock
layers, the process group spawner, the reaper that outlives the host, the environment policy,
and the fingerprints of what the host itself runs (hook and MCP server scripts).

``ProcessPolicy`` is decided once per session (``open_process_policy``) and applied to every
command; ``toolbatch.producers`` spawns through it.
"""

from toolbatch.sandbox._bubblewrap import PROTECTED_NAMES, find_bubblewrap
from toolbatch.sandbox._environment import (
    DEFAULT_INHERITED_ENV_VARS,
    SHELL_ENV_MODES,
    ShellEnvMode,
    minimal_environment,
    shell_environment,
)
from toolbatch.sandbox._pinning import ScriptPins, command_scripts
from toolbatch.sandbox._policy import (
    LandlockProbe,
    NamespacesProbe,
    ProcessPolicy,
    SandboxMode,
    check_process_options,
    open_process_policy,
)
from toolbatch.sandbox._process import (
    GroupStop,
    SpawnThread,
    group_alive,
    open_group_process,
    open_pipe,
    stop_group,
)
from toolbatch.sandbox._reaper import (
    ensure_reaper,
    forget_group,
    reap_with_host,
)

__all__ = [
    "DEFAULT_INHERITED_ENV_VARS",
    "PROTECTED_NAMES",
    "SHELL_ENV_MODES",
    "GroupStop",
    "LandlockProbe",
    "NamespacesProbe",
    "ProcessPolicy",
    "SandboxMode",
    "ScriptPins",
    "ShellEnvMode",
    "SpawnThread",
    "check_process_options",
    "command_scripts",
    "ensure_reaper",
    "find_bubblewrap",
    "forget_group",
    "group_alive",
    "minimal_environment",
    "open_group_process",
    "open_pipe",
    "open_process_policy",
    "reap_with_host",
    "shell_environment",
    "stop_group",
]
