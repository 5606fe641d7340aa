#!/usr/bin/env python3
"""PostToolUseFailure: tell the model what failed, from the error's first line."""

import json
import sys

data = json.load(sys.stdin)
first = data["error"].splitlines()[0] if data["error"] else ""
print(
    json.dumps(
        {
            "hookSpecificOutput": {
                "hookEventName": "PostToolUseFailure",
                "additionalContext": (
                    f"{data['tool_name']} failed ({first}); interrupt={data['is_interrupt']}"
                ),
            }
        }
    )
)
