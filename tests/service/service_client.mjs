// A plain Node.js (20+) client for `toolbatch serve`: no npm packages.
//
//   node service_client.mjs SLEEP_SECONDS TOOLBATCH_COMMAND...
//
// It spawns `TOOLBATCH_COMMAND serve`, then: initialize, tools/list, a batch of two calls
// (checking progress notifications and the answer), a batch of two `sleep SLEEP_SECONDS`
// calls cancelled with batch/cancel once both run, and shutdown. It prints one JSON line,
// the summary, and exits 0 when every check held (1 otherwise, with the reason).

import { spawn } from "node:child_process";

const [sleepSeconds, ...command] = process.argv.slice(2);
if (!sleepSeconds || command.length === 0) {
  console.error("usage: node service_client.mjs SLEEP_SECONDS TOOLBATCH_COMMAND...");
  process.exit(2);
}

const child = spawn(command[0], [...command.slice(1), "serve"], {
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));

const pending = new Map();
const listeners = [];
let buffer = "";
let nextId = 0;

child.stdout.setEncoding("utf8");
child.stdout.on("data", (chunk) => {
  buffer += chunk;
  let end;
  // Frames end at "\n" only: U+2028 and U+2029 may appear raw inside strings.
  while ((end = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, end);
    buffer = buffer.slice(end + 1);
    const message = JSON.parse(line);
    if ("id" in message && !("method" in message)) {
      const waiter = pending.get(message.id);
      if (waiter) {
        pending.delete(message.id);
        waiter(message);
      }
    } else {
      for (const listener of listeners) listener(message);
    }
  }
});

function request(method, params) {
  const id = ++nextId;
  const answer = new Promise((resolve) => pending.set(id, resolve));
  child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
  return { id, answer };
}

function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
}

const progress = [];
listeners.push((message) => {
  if (message.method === "batch/progress") progress.push(message.params);
});

function progressFor(requestId) {
  return progress.filter((p) => p.request_id === requestId);
}

function waitFor(predicate) {
  return new Promise((resolve) => {
    if (predicate()) return resolve();
    listeners.push(() => {
      if (predicate()) resolve();
    });
  });
}

async function main() {
  const init = await request("initialize", { client_info: { name: "node-test" } }).answer;
  check(init.result.protocol_version === 1, "protocol_version is 1");

  const tools = await request("tools/list", {}).answer;
  check(
    tools.result.tools.some((tool) => tool.name === "run_shell_command"),
    "tools/list has run_shell_command",
  );

  const text = "node \u2028 héllo 😀";
  const batch = request("batch/run", {
    calls: [
      { id: "n1", name: "run_shell_command", args: { command: `printf '%s' '${text}'` } },
      { id: "n2", name: "run_shell_command", args: { command: "echo nope >&2; exit 4" } },
    ],
    budget: null,
  });
  const answer = await batch.answer;
  const responses = answer.result.responses;
  const statuses = responses.map((response) => response.status);
  check(
    responses[0].parts[0].functionResponse.response.output === `${text}\n[exit code: 0]`,
    "the output arrives unchanged, U+2028 included",
  );
  check(
    responses[1].parts[0].functionResponse.response.output.includes("[exit code: 4]"),
    "the failing command's exit code is in its output",
  );
  check(answer.result.parts.length === 2, "two parts for the model");
  for (const index of [0, 1]) {
    const mine = progressFor(batch.id)
      .filter((p) => p.index === index)
      .map((p) => p.status);
    check(mine[0] === "queued" && mine.at(-1) === "success", `progress of call ${index}`);
  }

  const long = request("batch/run", {
    calls: [
      { id: "s1", name: "run_shell_command", args: { command: `sleep ${sleepSeconds}` } },
      { id: "s2", name: "run_shell_command", args: { command: `sleep ${sleepSeconds}` } },
    ],
  });
  await waitFor(() => {
    const started = progressFor(long.id).filter((p) => p.status === "running");
    return new Set(started.map((p) => p.index)).size === 2;
  });
  const cancelStarted = Date.now();
  const cancel = await request("batch/cancel", { request_id: long.id }).answer;
  check(cancel.result.cancelled === true, "batch/cancel found the batch");
  const cancelled = await long.answer;
  const cancelMs = Date.now() - cancelStarted;
  const cancelledStatuses = cancelled.result.responses.map((response) => response.status);
  check(
    cancelledStatuses.every((status) => status === "cancelled"),
    "the cancelled batch answers with cancelled responses",
  );

  const shutdown = await request("shutdown", {}).answer;
  check(JSON.stringify(shutdown.result) === "{}", "shutdown answers {}");
  child.stdin.end();
  const exitCode = await exited;
  check(exitCode === 0, "the service exits 0");
  return {
    ok: true,
    statuses,
    cancelled_statuses: cancelledStatuses,
    cancel_ms: cancelMs,
    exit_code: exitCode,
  };
}

const timer = setTimeout(() => {
  console.log(JSON.stringify({ ok: false, error: "timed out after 90 s" }));
  child.kill("SIGTERM");
  process.exit(1);
}, 90_000);

main().then(
  (summary) => {
    clearTimeout(timer);
    console.log(JSON.stringify(summary));
    process.exit(0);
  },
  (error) => {
    clearTimeout(timer);
    console.log(JSON.stringify({ ok: false, error: String(error && error.stack) }));
    child.kill("SIGTERM");
    process.exit(1);
  },
);
