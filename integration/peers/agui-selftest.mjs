// Self-test of agui-client.mjs: a hand-written AG-UI SSE server (node:http, no deps) and the
// client run on both lanes against it. Exits non-zero when any expectation fails.
//
//   node agui-selftest.mjs
import http from 'node:http';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Streams by URL path. Each gets the parsed RunAgentInput and a send function.
const streams = {
  async valid(input, send) {
    send({ type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId });
    send({ type: 'TEXT_MESSAGE_START', messageId: 'm1', role: 'assistant' });
    send({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'Hello' });
    send({ type: 'TEXT_MESSAGE_END', messageId: 'm1' });
    send({ type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId });
  },
  async invalid(input, send) {
    send({ type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId });
    send({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm1', delta: 'Hello' });
    send({ type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId });
  },
  async truncated(input, send) {
    send({ type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId });
  },
  async interrupt(input, send) {
    send({ type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId });
    if (input.resume?.length) {
      const a = input.resume[0];
      send({ type: 'TEXT_MESSAGE_START', messageId: `m-${input.runId}`, role: 'assistant' });
      send({ type: 'TEXT_MESSAGE_CONTENT', messageId: `m-${input.runId}`, delta: `${a.interruptId}:${a.status}:${a.payload?.text}` });
      send({ type: 'TEXT_MESSAGE_END', messageId: `m-${input.runId}` });
      send({ type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId });
      return;
    }
    send({ type: 'RUN_FINISHED', threadId: input.threadId, runId: input.runId,
      outcome: { type: 'interrupt', interrupts: [{ id: 'int-1', reason: 'input_required', message: 'colour?' }] } });
  },
  async slow(input, send, res) {
    send({ type: 'RUN_STARTED', threadId: input.threadId, runId: input.runId });
    send({ type: 'STEP_STARTED', stepName: 'work' });
    for (let i = 0; i < 50 && !res.destroyed; i++) await sleep(100);
  },
};

const server = http.createServer(async (req, res) => {
  let body = '';
  for await (const c of req) body += c;
  const input = JSON.parse(body);
  const stream = streams[req.url.slice(1)];
  if (!stream) return res.writeHead(404).end();
  res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
  await stream(input, (ev) => res.write(`data: ${JSON.stringify(ev)}\n\n`), res);
  res.end();
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}`;

function client(lane, url, job) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(here, 'agui-client.mjs'), lane, url], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    p.on('error', reject);
    p.on('close', (code) => {
      if (code !== 0) return reject(new Error(`agui-client exited ${code}: ${err}`));
      resolve(JSON.parse(out));
    });
    p.stdin.end(JSON.stringify(job));
  });
}

const job = (extra = {}) => ({ threadId: 't1', messages: [{ id: 'u1', role: 'user', content: 'hi' }], ...extra });
const cases = [
  ['valid', job(), (r) => r.terminal && r.failed === null && r.warnings.length === 0 && r.outcome === 'success'
    && r.events.map((e) => e.type).join() === 'RUN_STARTED,TEXT_MESSAGE_START,TEXT_MESSAGE_CONTENT,TEXT_MESSAGE_END,RUN_FINISHED'],
  ['invalid', job(), (r) => typeof r.failed === 'string' && /No active text message/.test(r.failed)],
  ['truncated', job(), (r) => !r.terminal && r.failed === null],
  ['interrupt', job({ resumeAnswers: { '*': { status: 'resolved', payload: { text: 'blue' } } } }),
    (r) => r.runs.length === 2 && r.runs[0].outcome === 'interrupt' && r.runs[0].interrupts[0].id === 'int-1'
      && r.runs[0].pendingInterrupts.length === 1 && r.terminal && r.failed === null && r.warnings.length === 0
      && r.events.some((e) => e.delta === 'int-1:resolved:blue')],
  ['slow', job({ abortOnEvent: 'STEP_STARTED' }), (r) => r.aborted && r.terminal && r.failed === null],
];

let failures = 0;
for (const lane of ['v1', 'legacy']) {
  for (const [name, j, ok] of cases) {
    const r = await client(lane, `${base}/${name}`, j);
    const pass = ok(r);
    if (!pass) failures++;
    console.log(`${pass ? 'ok  ' : 'FAIL'} ${lane} ${name}: terminal=${r.terminal} failed=${r.failed} outcome=${r.outcome}`
      + ` aborted=${r.aborted} warnings=${JSON.stringify(r.warnings)} events=${r.events.map((e) => e.type).join(',')}`);
  }
}
server.close();
process.exit(failures ? 1 : 0);
