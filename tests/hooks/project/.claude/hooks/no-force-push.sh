#!/bin/bash
# PreToolUse: block force pushes by exiting 2; stderr is the reason the model sees.
input=$(cat)
if echo "$input" | grep -q -- '--force'; then
  echo "force pushes are not allowed here; push a new branch instead" >&2
  exit 2
fi
exit 0
