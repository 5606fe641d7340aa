"""A real PostToolBatch command hook for the chaos campaign (a script: stdlib only).

``python -I bench/_chaos_hook.py <mode>`` reads the batch from stdin, then, before anything
else, writes what it was given to ``$CHAOS_HOOK_DIR``: ``<pid>.env.json`` (its whole
environment) and ``<pid>.stdin.json`` (its input), each published atomically. Then it
behaves as ``<mode>`` says:

=========== ==========================================================================
ok          exits 0 without output
context     answers with ``additionalContext``
crash       writes to stderr and exits 1
hang        sleeps far past any hook timeout
garbage     prints text that is not JSON
block       exits 2 with a reason on stderr (stops the batch)
decision    answers ``{"decision": "block"}`` (stops the batch)
background  starts ``sleep 30`` in its process group and exits 0 at once
flood       prints 6 MiB (past the runner's 4 MiB cap)
=========== ==========================================================================
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def _publish(path: str, data: bytes) -> None:
    partial = f"{path}.partial"
    with open(partial, "wb") as file:
        file.write(data)
    os.replace(partial, path)


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    payload = sys.stdin.buffer.read()
    report_dir = os.environ.get("CHAOS_HOOK_DIR")
    if report_dir:
        stem = os.path.join(report_dir, str(os.getpid()))
        _publish(f"{stem}.env.json", json.dumps(dict(os.environ)).encode())
        _publish(f"{stem}.stdin.json", payload)
    if mode == "context":
        answer = {
            "hookSpecificOutput": {
                "hookEventName": "PostToolBatch",
                "additionalContext": "chaos command hook context",
            }
        }
        print(json.dumps(answer))
    elif mode == "crash":
        sys.stderr.write("chaos hook: crashing on purpose\n")
        return 1
    elif mode == "hang":
        time.sleep(30)
    elif mode == "garbage":
        print("this is { not json")
    elif mode == "block":
        sys.stderr.write("chaos hook: blocked on purpose\n")
        return 2
    elif mode == "decision":
        print(json.dumps({"decision": "block", "reason": "chaos hook decision"}))
    elif mode == "background":
        subprocess.Popen(
            ["sleep", "30"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    elif mode == "flood":
        sys.stdout.write("x" * (6 * 2**20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
