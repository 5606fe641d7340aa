#!/bin/bash
# PreToolUse on Bash, after Claude Code's hooks guide ("Hook output"): block dropping tables.
INPUT=$(cat)
COMMAND=$(echo "$INPUT" | jq -r '.tool_input.command')

if echo "$COMMAND" | grep -q "drop table"; then
  echo "Blocked: dropping tables is not allowed" >&2
  exit 2
fi

exit 0
