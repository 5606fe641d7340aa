#!/bin/bash
# PreToolUse: deny recursive deletes (JSON decision), as in Claude Code's hooks reference.
input=$(cat)
if echo "$input" | grep -q 'rm -rf'; then
  cat <<'JSON'
{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
 "permissionDecisionReason": "Destructive command blocked by hook"}}
JSON
else
  exit 0  # no decision; the normal permission flow applies
fi
