#!/bin/bash
# PreToolUse on Bash, after Claude Code's hooks guide ("Structured JSON output"): exit 0 and
# let the JSON decide.
COMMAND=$(jq -r '.tool_input.command')

if [[ "$COMMAND" == rm\ -rf* ]]; then
  jq -n '{
    hookSpecificOutput: {
      hookEventName: "PreToolUse",
      permissionDecision: "deny",
      permissionDecisionReason: "Destructive command blocked by hook"
    }
  }'
fi
exit 0
