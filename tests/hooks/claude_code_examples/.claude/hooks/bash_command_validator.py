#!/usr/bin/env python3
"""PreToolUse hook for the Bash tool: suggest better commands, and block until they are used.

Written after Claude Code's bash_command_validator example (see ../../README.md): it acts only
when tool_name is "Bash", reads tool_input.command, and exits 2 (which blocks the call and
shows stderr to the model) with one line per problem.
"""

import json
import re
import sys

RULES = [
    (
        r"^grep\b(?!.*\|)",
        "Use 'rg' (ripgrep) instead of 'grep' for better performance and features",
    ),
    (r"^find\s+\S+\s+-name\b", "Use 'rg --files -g pattern' instead of 'find -name'"),
]


def problems(command: str) -> list[str]:
    return [message for pattern, message in RULES if re.search(pattern, command)]


def main() -> None:
    try:
        data = json.load(sys.stdin)
    except json.JSONDecodeError as exc:
        print(f"Error: Invalid JSON input: {exc}", file=sys.stderr)
        sys.exit(1)  # a non-blocking hook error: the call goes on
    if data.get("tool_name", "") != "Bash":
        sys.exit(0)
    command = data.get("tool_input", {}).get("command", "")
    if not command:
        sys.exit(0)
    found = problems(command)
    if found:
        for message in found:
            print(f"• {message}", file=sys.stderr)
        sys.exit(2)  # only exit code 2 blocks the call and tells the model why


if __name__ == "__main__":
    main()
