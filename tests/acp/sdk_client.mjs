// Drives `toolbatch acp` with the official TypeScript SDK (@agentclientprotocol/sdk), as an
// editor does: initialize, session/new, prompts that need permission (one command is
// rejected), a large result, and a prompt cancelled while its command runs.
//
// Usage: node sdk_client.mjs <sdk install dir> <session cwd> -- <agent command...>
// Prints one JSON object with everything the client received; exits 1 on any error.
// Frames over MAX_FRAME_BYTES make the SDK close the connection, which fails the run.

import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const MAX_FRAME_BYTES = 256 * 1024;
const WAIT_MS = 30_000;

const [sdkDir, cwd, separator, ...agentArgv] = process.argv.slice(2);
if (separator !== "--" || agentArgv.length === 0) {
  throw new Error("usage: node sdk_client.mjs <sdk dir> <cwd> -- <agent command...>");
}
const require = createRequire(`${sdkDir}/package.json`);
const acp = await import(pathToFileURL(require.resolve("@agentclientprotocol/sdk")).href);

const agentProcess = spawn(agentArgv[0], agentArgv.slice(1), {
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => agentProcess.on("exit", (code) => resolve(code)));
const stream = acp.ndJsonStream(
  Writable.toWeb(agentProcess.stdin),
  Readable.toWeb(agentProcess.stdout),
  { maxMessageBytes: MAX_FRAME_BYTES },
);

const updates = [];
const permissions = [];
// Polls a condition every 20 ms (/proc offers nothing to wait on).
function waitFor(predicate, what) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const poll = setInterval(() => {
      if (predicate()) {
        clearInterval(poll);
        resolve();
      } else if (Date.now() - started > WAIT_MS) {
        clearInterval(poll);
        reject(new Error(`never saw ${what}`));
      }
    }, 20);
  });
}

const app = acp
  .client({ name: "toolbatch-sdk-test" })
  .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
    permissions.push(params);
    const command = params.toolCall.rawInput?.command ?? "";
    const optionId = command.includes("rejected") ? "reject_once" : "allow_once";
    return { outcome: { outcome: "selected", optionId } };
  })
  .onNotification(acp.methods.client.session.update, async ({ params }) => {
    updates.push(params.update);
  });

function sleepRunning() {
  for (const pid of readdirSync("/proc")) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "latin1") === "sleep\u00003129\u0000") {
        return true;
      }
    } catch {
      // the process ended while we looked
    }
  }
  return false;
}

function text(value) {
  return [{ type: "text", text: value }];
}

const result = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
  });
  const { sessionId } = await ctx.request(acp.methods.agent.session.new, {
    cwd,
    mcpServers: [],
  });
  const prompt = (value) =>
    ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: text(value) });

  const stops = [];
  stops.push(
    (await prompt("$ seq 1 400000\n$ python3 -c \"print('漢' * 24000)\"\n$ echo hello-sdk"))
      .stopReason,
  );
  stops.push((await prompt("$ touch rejected.txt")).stopReason);

  const sleeping = prompt("$ sleep 3129");
  await waitFor(() => sleepRunning(), "the sleep started by the agent");
  await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
  stops.push((await sleeping).stopReason);
  return { init, sessionId, stops, updates, permissions };
});

agentProcess.stdin.end();
const code = await exited;
process.stdout.write(JSON.stringify({ ...result, agentExitCode: code }) + "\n");
