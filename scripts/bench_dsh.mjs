// Times DSH's released JSONL backend for scripts/bench_dsh.py (peer rows of the benchmark).
//
// Usage: node bench_dsh.mjs PACKAGES_DIR < command.json, where PACKAGES_DIR holds the
// @deepseek-ai packages (tests/interop/upstream.py installs them). Commands ("op"):
//
//   append  create session "id" under "root" and append every event of "events" (type,
//           data, surfaceOp, sourceEventSeqs) through the live Session, then flush the
//           session so every event is durable; "runs" times, one fresh session id per run.
//   load    load session "id" under "root" with the backend's load() "runs" times.
//
// "compression" ("none" by default, or "zstd") is the backend's encoding for both.
//
// Prints one JSON line: {"ok": true, "seconds": [...], "events": N} (wall seconds of each
// run, measured with process.hrtime around the work only).
import { pathToFileURL } from 'node:url';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

const [packagesDir] = process.argv.slice(2);

async function load(name) {
  const manifest = JSON.parse(await readFile(join(packagesDir, name, 'package.json'), 'utf8'));
  const entry = typeof manifest.exports?.['.'] === 'object' ? manifest.exports['.'].default : manifest.main;
  return import(pathToFileURL(join(packagesDir, name, entry)).href);
}

const { Context } = await load('@deepseek-ai/cordis');
const { SessionStore } = await load('@deepseek-ai/dsh-session');
const JsonlSessionPersistence = (await load('@deepseek-ai/dsh-session-persistence-jsonl')).default;

async function backend(root, compression) {
  const ctx = new Context();
  await ctx.plugin(SessionStore);
  await ctx.plugin(JsonlSessionPersistence, { root, compression: compression ?? 'none' });
  return ctx;
}

const elapsed = (start) => Number(process.hrtime.bigint() - start) / 1e9;

async function append(command) {
  const ctx = await backend(command.root, command.compression);
  const seconds = [];
  for (let run = 0; run < command.runs; run++) {
    const id = `${command.id}-${run}`;
    const start = process.hrtime.bigint();
    const session = ctx.sessions.create(id, { meta: { cwd: command.cwd } });
    for (const event of command.events) {
      const opts = {};
      if (event.surfaceOp !== undefined) opts.surfaceOp = event.surfaceOp;
      if (event.sourceEventSeqs !== undefined) opts.sourceEventSeqs = event.sourceEventSeqs;
      session.append(event.type, event.data, opts);
    }
    await ctx.sessions.flush(session);
    seconds.push(elapsed(start));
  }
  await ctx.fiber.dispose();
  return { seconds, events: command.events.length };
}

async function loadRuns(command) {
  const ctx = await backend(command.root, command.compression);
  const seconds = [];
  let events = 0;
  for (let run = 0; run < command.runs; run++) {
    const start = process.hrtime.bigint();
    const view = await ctx.sessionPersistence.load(command.id);
    seconds.push(elapsed(start));
    events = view.events.length;
  }
  await ctx.fiber.dispose();
  return { seconds, events };
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const command = JSON.parse(Buffer.concat(chunks).toString('utf8'));
try {
  const ops = { append, load: loadRuns };
  if (!(command.op in ops)) throw new Error(`unknown op ${JSON.stringify(command.op)}`);
  process.stdout.write(JSON.stringify({ ok: true, ...(await ops[command.op](command)) }) + '\n');
} catch (error) {
  process.stdout.write(JSON.stringify({ ok: false, error: String(error?.stack ?? error) }) + '\n');
  process.exitCode = 1;
}
