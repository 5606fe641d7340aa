#!/usr/bin/env python3
"""PostToolUse: when a command printed warnings, ask the model to fix them (decision block)."""

import json
import sys

data = json.load(sys.stdin)
output = data["tool_response"].get("stdout") or data["tool_response"].get("output") or ""
if "warning" in str(output):
    print(
        json.dumps(
            {
                "decision": "block",
                "reason": f"{data['tool_name']} printed warnings: fix them before going on",
                "hookSpecificOutput": {
                    "hookEventName": "PostToolUse",
                    "additionalContext": f"took {data['duration_ms']} ms",
                },
            }
        )
    )
