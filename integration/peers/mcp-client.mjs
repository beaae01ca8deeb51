// MCP client for Baton's integration tests (@modelcontextprotocol/sdk 1.32.2): connects to
// Baton's /mcp with the official Client over StreamableHTTPClientTransport, runs the steps
// of one job and prints one JSON line with what it saw.
//
//   node mcp-client.mjs '{"url":"http://127.0.0.1:8080/mcp","token":"","elicit":"blue","steps":[…]}'
//
// elicit: when set, the client declares the elicitation capability and accepts every
// elicitation/create with {text: <elicit>} (each request is recorded in "elicited").
// steps, each {"op": …}:
//   {"op":"list"}                                   → {tools:[{name, description, inputSchema}]}
//   {"op":"call","tool":…, "args":{…}}              → {result} or {error:{code, message}}
//   {"op":"progress","tool":…, "args":{…}}          → {result, progress:[{progress, message}]}
//   {"op":"resume","tool":…, "payload":…}          → calls tool with {prompt:"", resume:{interruptId of
//                                                      the last input_required result, payload}}
//                                                      ("interruptId" overrides): {result} or {error}
//   {"op":"abort","tool":…, "args":{…}, "abortOn":"peer: "}
//                                                   → aborts the call at its first progress
//                                                      notification whose message starts
//                                                      with abortOn: {aborted, abortAt (epoch ms),
//                                                      error, progress}
//   {"op":"abortWhen","tool":…, "args":{…}, "waitUrl":…, "waitState":"TASK_STATE_WORKING"}
//                                                   → aborts the call once the A2A peer's
//                                                      GET waitUrl (its /test/log) shows a task
//                                                      it did not have before the call in
//                                                      waitState: {aborted, abortAt, error}
// A step's "bigPrompt": n replaces its arguments with {prompt: n times "a"} (too long for argv);
// its "meta" object is sent as the request's _meta (a calling Baton's baton/depth, say).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const job = JSON.parse(process.argv[2]);
const headers = job.token ? { Authorization: `Bearer ${job.token}` } : {};
const elicited = [];
const client = new Client({ name: 'baton-test-client', version: '1.0.0' },
  { capabilities: job.elicit ? { elicitation: { form: {} } } : {} });
if (job.elicit) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    elicited.push(req.params);
    return { action: 'accept', content: { text: job.elicit } };
  });
}
const transport = new StreamableHTTPClientTransport(new URL(job.url), { requestInit: { headers } });
await client.connect(transport);
const out = { protocolVersion: client.transport?.protocolVersion ?? '', steps: [] };
const failure = (e) => ({ code: e?.code ?? null, message: String(e?.message ?? e) });

for (const step of job.steps) {
  const seen = { op: step.op };
  if (step.bigPrompt) step.args = { prompt: 'a'.repeat(step.bigPrompt) };
  try {
    switch (step.op) {
      case 'list':
        seen.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
        break;
      case 'call':
        seen.result = await client.callTool({ name: step.tool, arguments: step.args, ...(step.meta ? { _meta: step.meta } : {}) },
          undefined, { timeout: 60000 });
        break;
      case 'resume': { // answers the question of the last call that returned one
        const asked = [...out.steps].reverse().find((x) => x.result?.structuredContent?.status === 'input_required');
        seen.result = await client.callTool({ name: step.tool,
          arguments: { prompt: '', resume: { interruptId: step.interruptId ?? asked?.result.structuredContent.interruptId, payload: step.payload } } },
          undefined, { timeout: 60000 });
        break;
      }
      case 'progress': {
        seen.progress = [];
        seen.result = await client.callTool({ name: step.tool, arguments: step.args }, undefined,
          { timeout: 60000, onprogress: (p) => seen.progress.push({ progress: p.progress, message: p.message }) });
        break;
      }
      case 'abort': {
        const ac = new AbortController();
        seen.progress = [];
        try {
          await client.callTool({ name: step.tool, arguments: step.args }, undefined, {
            timeout: 60000, signal: ac.signal,
            onprogress: (p) => {
              seen.progress.push({ progress: p.progress, message: p.message });
              if (!ac.signal.aborted && (p.message ?? '').startsWith(step.abortOn ?? '')) {
                seen.abortAt = performance.timeOrigin + performance.now(); // epoch ms, as the peer's cancelAt
                ac.abort('the test aborts');
              }
            },
          });
        } catch (e) {
          seen.aborted = ac.signal.aborted;
          seen.error = failure(e);
        }
        // The SDK posts notifications/cancelled without waiting for it: one more round
        // trip lets it go out before the client closes.
        await client.listTools();
        break;
      }
      case 'abortWhen': {
        const ac = new AbortController();
        const before = new Set(Object.keys((await (await fetch(step.waitUrl)).json()).tasks ?? {}));
        const watch = (async () => {
          while (!ac.signal.aborted) {
            const log = await (await fetch(step.waitUrl)).json();
            if (Object.entries(log.tasks ?? {}).some(([id, state]) => !before.has(id) && state === step.waitState)) {
              seen.abortAt = performance.timeOrigin + performance.now();
              ac.abort('the test aborts');
              return;
            }
            await new Promise((r) => setTimeout(r, 20));
          }
        })();
        try {
          seen.result = await client.callTool({ name: step.tool, arguments: step.args, ...(step.meta ? { _meta: step.meta } : {}) },
            undefined, { timeout: 60000, signal: ac.signal });
        } catch (e) {
          seen.aborted = ac.signal.aborted;
          seen.error = failure(e);
        }
        ac.abort('done');
        await watch;
        await client.listTools(); // lets notifications/cancelled go out before the client closes
        break;
      }
      default:
        throw new Error(`unknown op ${step.op}`);
    }
  } catch (e) {
    seen.error = failure(e);
  }
  out.steps.push(seen);
}
out.elicited = elicited;
await transport.terminateSession(); // DELETE: the server ends the session
await client.close();
console.log(JSON.stringify(out));
