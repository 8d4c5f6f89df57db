// Writes the .jsonl.zstd logs tests/jsonl/test_zstd_interop.py reads, with Node's own
// zstd (node:zlib, Node >= 22.15) called as DSH's writer calls it: zstdCompressSync,
// default level, content checksum on; one frame for the header line, one per batch.
// Usage: node make_node_logs.js OUTPUT_DIR
"use strict";
const zlib = require("node:zlib");
const fs = require("node:fs");
const path = require("node:path");
const crypto = require("node:crypto");

const sha256 = (text) => crypto.createHash("sha256").update(text).digest("hex");

const options = { params: { [zlib.constants.ZSTD_c_checksumFlag]: 1 } };
const out = process.argv[2];
const header =
  '{"type":"session","version":0,"id":"node-zstd","createdAt":1760000000000,"delegationDepth":0}\n';
let seq = 0;
const event = (type, data) =>
  JSON.stringify({ type, seq: seq++, time: 1760000000000 + seq, data }) + "\n";
const batches = [];
batches.push(event("turn/start", { turn: 1 }) + event("step/start", { turn: 1, step: 1 }));
let stream = "";
for (let i = 0; i < 4000; i++) {
  const delta = "word " + i + " ".repeat(i % 7);
  stream += event("assistant/chunk", { turn: 1, step: 1, index: 0, kind: "text", delta });
}
batches.push(stream); // more than one 128 KiB block
batches.push(
  event("step/end", { turn: 1, step: 1 }) +
    event("turn/end", { turn: 1, reason: { kind: "completed" } }),
);
batches.push(event("turn/start", { turn: 2 })); // a one-line batch
const frames = [zlib.zstdCompressSync(Buffer.from(header), options)];
for (const batch of batches) frames.push(zlib.zstdCompressSync(Buffer.from(batch), options));
fs.writeFileSync(path.join(out, "node-sync.jsonl.zstd"), Buffer.concat(frames));
const expected = { "node-sync.jsonl.zstd": sha256(header + batches.join("")) };
// The header frame, then a streaming compressor's output: a frame without a content size
// (and, on end(), an empty one).
const streamed = zlib.createZstdCompress(options);
const parts = [];
streamed.on("data", (chunk) => parts.push(chunk));
streamed.on("end", () => {
  fs.writeFileSync(path.join(out, "node-stream.jsonl.zstd"), Buffer.concat([frames[0], ...parts]));
  expected["node-stream.jsonl.zstd"] = sha256(header + stream);
  // The sha256 of each file's plaintext, which the tests compare the decoded bytes with.
  fs.writeFileSync(path.join(out, "plaintext.sha256.json"), JSON.stringify(expected, null, 1) + "\n");
});
streamed.write(Buffer.from(stream.slice(0, 50000)));
streamed.end(Buffer.from(stream.slice(50000)));
