#!/usr/bin/env python3
"""PreToolUse: run deploys as a dry run (updatedInput), and say so to the model."""

import json
import sys

data = json.load(sys.stdin)
command = data["tool_input"]["command"]
print(
    json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "allow",
                "permissionDecisionReason": "deploys run as dry runs",
                "updatedInput": {**data["tool_input"], "command": f"echo would run: {command}"},
                "additionalContext": "Deploys only run as dry runs from this agent.",
            }
        }
    )
)
