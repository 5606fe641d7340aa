"""Where a shell command runs: the sandbox policy, its namespaces (bubblewrap) and Landlock
layers, the process group spawner, the reaper that outlives the host, the environment policy,
and the fingerprints of what the host itself runs (hook and MCP server scripts).

``ProcessPolicy`` is decided once per session (``open_process_policy``) and applied to every
command; ``toolbatch.producers`` spawns through it.
"""

from toolbatch.sandbox._bubblewrap import PROTECTED_NAMES, find_bubblewrap
from toolbatch.sandbox._confinement import (
    LandlockProbe as LandlockProbe,
    NamespacesProbe as NamespacesProbe,
)
from toolbatch.sandbox._environment import (
    DEFAULT_INHERITED_ENV_VARS,
    SHELL_ENV_MODES as SHELL_ENV_MODES,
    ShellEnvMode as ShellEnvMode,
    minimal_environment as minimal_environment,
    shell_environment as shell_environment,
)
from toolbatch.sandbox._options import (
    CommandLineFlag as CommandLineFlag,
    SandboxMode as SandboxMode,
    SandboxOptions as SandboxOptions,
    sandbox_flags as sandbox_flags,
)
from toolbatch.sandbox._pinning import ScriptPins as ScriptPins, command_scripts as command_scripts
from toolbatch.sandbox._policy import (
    ProcessPolicy as ProcessPolicy,
    open_process_policy,
    open_sandbox as open_sandbox,
)
from toolbatch.sandbox._process import (
    GroupStop as GroupStop,
    SpawnThread as SpawnThread,
    command_alive as command_alive,
    group_alive as group_alive,
    open_group_process as open_group_process,
    open_pipe as open_pipe,
    stop_group,
)
from toolbatch.sandbox._reaper import (
    ensure_reaper as ensure_reaper,
    forget_group as forget_group,
    reap_with_host as reap_with_host,
)
from toolbatch.sandbox._spawned import SpawnedCommand as SpawnedCommand
from toolbatch.sandbox._spawner import SpawnerLost as SpawnerLost

__all__ = [
    "DEFAULT_INHERITED_ENV_VARS",
    "PROTECTED_NAMES",
    "find_bubblewrap",
    "open_process_policy",
    "stop_group",
]
