#!/bin/bash
# PostToolBatch: one line of context for the whole batch.
count=$(cat | grep -o '"tool_use_id"' | wc -l)
printf '{"hookSpecificOutput": {"hookEventName": "PostToolBatch", "additionalContext": "%s calls in this batch"}}\n' "$count"
