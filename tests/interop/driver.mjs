// Drives DSH's released JSONL persistence backend for dsh-store's interoperability tests.
//
// Usage: node driver.mjs PACKAGES_DIR < command.json
// PACKAGES_DIR is the node_modules directory holding the @deepseek-ai packages. The command
// is one JSON object with an "op":
//
//   write   run "actions" against live sessions (create, append, flush, fork, resume,
//           progress, sleep) through the real SessionStore + JSONL backend ("store-append"
//           goes straight to the backend's append()), then dispose the context, which
//           drains every buffered event. Prints "progress N" lines
//           while it runs (the tests SIGKILL it between them) and a final JSON result.
//   inspect for each id: the backend's own inspect() (or load() with "mode": "load"),
//           readFrom(id, 0) (the stored events without closers) and deriveMessages() of
//           a Session built from the balanced view.
//   sweep   for each byte offset: write that prefix of "source" as the transcript of "id"
//           and report the backend's inspect verdict on it (one backend, one root).
//   list    the backend's list().
//   time-load  the backend's own load(id) of each id, timed (wall ms per load, and the
//           process's peak RSS afterwards), for the peer benchmark.
//
// The write action "chunks" appends one assistant/chunk per entry of "chunks" (all of the
// same turn and step) and flushes after the entries listed in "flushAfter": a whole
// streamed block in one action, so a benchmark log of a million chunks stays a small command.
//
// Every result is one JSON line on stdout: {"ok": true, ...} or, for a command that
// failed as a whole, {"ok": false, "error": {...}}. A refused session inside inspect/sweep
// is reported per item with its error name and message, never as a driver failure.
import { pathToFileURL } from 'node:url';
import { mkdir, writeFile, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

const [packagesDir] = process.argv.slice(2);
if (!packagesDir) {
  process.stderr.write('usage: node driver.mjs PACKAGES_DIR < command.json\n');
  process.exit(2);
}

async function load(name) {
  const manifest = JSON.parse(await readFile(join(packagesDir, name, 'package.json'), 'utf8'));
  const entry = typeof manifest.exports?.['.'] === 'object' ? manifest.exports['.'].default : manifest.main;
  return import(pathToFileURL(join(packagesDir, name, entry)).href);
}

const { Context } = await load('@deepseek-ai/cordis');
const sessionModule = await load('@deepseek-ai/dsh-session');
const { SessionStore, Session } = sessionModule;
const JsonlSessionPersistence = (await load('@deepseek-ai/dsh-session-persistence-jsonl')).default;

function say(value) {
  process.stdout.write(JSON.stringify(value) + '\n');
}

function errorFacts(error) {
  return { name: error?.name ?? 'Error', constructor: error?.constructor?.name ?? null, message: String(error?.message ?? error) };
}

async function backend(command) {
  const ctx = new Context();
  await ctx.plugin(SessionStore);
  await ctx.plugin(JsonlSessionPersistence, {
    root: command.root,
    compression: command.compression ?? 'none',
    packChunks: command.packChunks ?? true,
    // The tests flush explicitly; a long window keeps batch boundaries (and so the packing
    // of chunk runs, which is per batch) where the actions put them.
    writeBatchMaxDelayMs: command.windowMs ?? 600000,
  });
  return ctx;
}

/** A deterministic clock, so the same actions give the same bytes. */
function installClock(start) {
  let now = start;
  Date.now = () => (now += 3);
}

async function write(command) {
  if (command.clock !== undefined) installClock(command.clock);
  const ctx = await backend(command);
  const live = new Map();
  // Per session: seqs of chunks since the last assistant/message of the step, and the seq
  // of each tool/call by call id, to fill in the references the actions ask for.
  const pending = new Map();
  const calls = new Map();
  let progress = 0;
  const track = (id, event) => {
    if (event.type === 'assistant/chunk') pending.get(id).push(event.seq);
    else if (event.type === 'assistant/message' || event.type === 'step/start') pending.set(id, []);
    else if (event.type === 'tool/call') calls.get(id).set(event.data.callId, event.seq);
  };
  const adopt = (id, session) => {
    live.set(id, session);
    pending.set(id, []);
    calls.set(id, new Map());
    for (const event of session.events) track(id, event);
  };
  for (const action of command.actions) {
    switch (action.do) {
      case 'create':
        adopt(action.id, ctx.sessions.create(action.id, { meta: { cwd: action.cwd } }));
        break;
      case 'resume': {
        const view = await ctx.sessionPersistence.load(action.id);
        const seed = structuredClone(view.events);
        const meta = structuredClone(view.meta);
        adopt(action.id, ctx.sessions.create(action.id, { seed, meta: { cwd: meta.cwd, createdAt: meta.createdAt } }));
        break;
      }
      case 'fork': {
        // boundary: an event seq, {"turnEnd": k} for the k-th turn/end, or null for the end.
        const source = live.get(action.id);
        let boundary = action.boundary ?? undefined;
        if (typeof boundary === 'object' && boundary !== undefined) {
          boundary = source.events.filter((event) => event.type === 'turn/end')[boundary.turnEnd - 1].seq;
        }
        adopt(action.child, ctx.sessions.fork(source, boundary, action.child));
        break;
      }
      case 'append': {
        const session = live.get(action.id);
        const opts = {};
        if (action.surfaceOp !== undefined) opts.surfaceOp = action.surfaceOp;
        if (action.claimChunks) opts.sourceEventSeqs = [...pending.get(action.id)];
        if (action.citeCall !== undefined) opts.sourceEventSeqs = [calls.get(action.id).get(action.citeCall)];
        const event = Object.keys(opts).length
          ? session.append(action.type, action.data, opts)
          : session.append(action.type, action.data);
        track(action.id, event);
        break;
      }
      case 'chunks': {
        const session = live.get(action.id);
        const flushAfter = new Set(action.flushAfter ?? []);
        for (const [index, chunk] of action.chunks.entries()) {
          track(action.id, session.append('assistant/chunk', { turn: action.turn, step: action.step, chunk }));
          if (flushAfter.has(index)) await ctx.sessions.flush(session);
        }
        break;
      }
      case 'store-append': {
        // Straight through the backend's append() (a cold id: it adopts the stored log),
        // for events a live Session cannot produce, such as an ignorable plugin event.
        const stored = await ctx.sessionPersistence.readFrom(action.id, 0);
        const events = action.events.map((event, index) => ({ ...event, seq: stored.events.length + index, time: Date.now() }));
        await ctx.sessionPersistence.append(action.id, events);
        break;
      }
      case 'flush':
        await ctx.sessions.flush(live.get(action.id));
        break;
      case 'progress':
        say({ progress: ++progress });
        break;
      case 'sleep':
        await new Promise((resolve) => setTimeout(resolve, action.ms));
        break;
      default:
        throw new Error(`unknown action ${JSON.stringify(action.do)}`);
    }
  }
  const counts = Object.fromEntries([...live].map(([id, session]) => [id, session.events.length]));
  await ctx.fiber.dispose();
  say({ ok: true, events: counts });
}

function closerFacts(event) {
  const facts = { type: event.type };
  if (event.type === 'tool/result') {
    const block = event.data.message.content.find((part) => part.type === 'tool-result');
    facts.callId = event.data.message.source?.callId ?? null;
    facts.code = event.data.error?.code ?? null;
    facts.text = block.content.filter((part) => part.type === 'text').map((part) => part.text).join('');
  } else if (event.type === 'turn/end') {
    facts.reason = event.data.reason;
  }
  return facts;
}

async function report(ctx, id, mode, full) {
  try {
    const view = mode === 'load' ? await ctx.sessionPersistence.load(id) : await ctx.sessionPersistence.inspect(id);
    const stored = await ctx.sessionPersistence.readFrom(id, 0);
    const kept = stored.events.length;
    const result = { ok: true, kept, closers: view.events.slice(kept).map(closerFacts) };
    if (full) {
      const session = Session.create(id, structuredClone(view.events), structuredClone(view.meta));
      result.meta = view.meta;
      result.events = view.events;
      result.messages = session.deriveMessages();
      result.system = session.requestHeader()?.system ?? null;
    }
    return result;
  } catch (error) {
    return { ok: false, error: errorFacts(error) };
  }
}

async function inspect(command) {
  const ctx = await backend(command);
  const results = {};
  for (const id of command.ids) results[id] = await report(ctx, id, command.mode ?? 'inspect', true);
  await ctx.fiber.dispose();
  say({ ok: true, results });
}

async function sweep(command) {
  const ctx = await backend(command);
  const source = await readFile(command.source);
  const target = ctx.sessionPersistence.locate({ id: command.id, cwd: command.cwd });
  await mkdir(dirname(target.path), { recursive: true });
  const results = [];
  for (const offset of command.offsets) {
    await writeFile(target.path, source.subarray(0, offset));
    results.push(await report(ctx, command.id, 'inspect', command.messages ?? false));
  }
  await ctx.fiber.dispose();
  say({ ok: true, results });
}

async function list(command) {
  const ctx = await backend(command);
  try {
    const headers = await ctx.sessionPersistence.list();
    say({ ok: true, headers });
  } catch (error) {
    say({ ok: true, error: errorFacts(error) });
  }
  await ctx.fiber.dispose();
}

async function timeLoad(command) {
  const ctx = await backend(command);
  const loads = [];
  for (const id of command.ids) {
    const start = process.hrtime.bigint();
    const view = await ctx.sessionPersistence.load(id);
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    loads.push({ id, ms, events: view.events.length });
  }
  const peakRssKiB = process.resourceUsage().maxRSS;
  await ctx.fiber.dispose();
  say({ ok: true, loads, peakRssKiB });
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const command = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const ops = { write, inspect, sweep, list, 'time-load': timeLoad };
try {
  if (!(command.op in ops)) throw new Error(`unknown op ${JSON.stringify(command.op)}`);
  await ops[command.op](command);
} catch (error) {
  say({ ok: false, error: { ...errorFacts(error), stack: String(error?.stack ?? '') } });
  process.exitCode = 1;
}
