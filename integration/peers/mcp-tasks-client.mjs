// MCP tasks client for Baton's integration tests: @modelcontextprotocol/ext-tasks 0.2.2's
// requester session over the official TypeScript client (@modelcontextprotocol/client, the
// SDK v2 that ext-tasks adapts), on the 2026-07-28 wire, where the tasks extension is
// announced in the server's capabilities and declared in each request's _meta. It runs the
// steps of one job and prints one JSON line with what it saw.
//
//   node mcp-tasks-client.mjs '{"url":"http://127.0.0.1:8080/mcp","token":"…","steps":[…]}'
//
// Every step may name its own "url" and "token" (bearer): a replica and a principal. One
// connection (Client + task session) is kept per url and token; all share one endpoint id,
// so a task started on one replica can be resumed on another.
// steps, each {"op": …}:
//   {"op":"call","tool":…,"args":{…},"as":"t1"} → {kind:"task"|"immediate", taskId, status}
//                                                  (session.callTool; the execution is kept
//                                                  under "as", default "last")
//   {"op":"settle","of":"t1"}                    → {outcome:{status, result?, error?}, lastStatus}
//                                                  (the execution's settle: it polls tasks/get
//                                                  until the task ends)
//   {"op":"resume","taskId":…,"as":"t1"}         → {kind, taskId} (session.resumeTask: tasks/get,
//                                                  then an execution that follows the task)
//   {"op":"get","taskId":…}                      → {task:{taskId, status, statusMessage}}
//                                                  (session.task(id).snapshot(): tasks/get)
//   {"op":"cancel","taskId":…}                   → {} (session.task(id).cancel(): tasks/cancel)
// elicit: when set, the session answers every elicitation a task asks for (input_required)
// with {action:"accept", content:{text: <elicit>}}, which ext-tasks sends with tasks/update;
// each request is recorded in "elicited" ({taskId, message}).
// A failed step has {error:{code, message, name}}. "taskId" defaults to the task of the last
// call or resume in this job.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
  DispatchError, createTaskSessionEndpointId, createTaskSessionFromClient,
} from '@modelcontextprotocol/ext-tasks/client';

const protocolVersion = '2026-07-28';
const clientInfo = { name: 'baton-tasks-test', version: '1.0.0' };
const clientCapabilities = {};

const job = JSON.parse(process.argv[2]);
const endpointId = await createTaskSessionEndpointId('baton-test', { service: 'baton' });

// RawDispatch is the host's raw request path that ext-tasks requires for a 2026-07-28 tasks
// server (its rawDispatch adapter): the SDK Client decodes every result by its method and
// refuses a tools/call answered with {"resultType":"task"}, so the task requests go over a
// second transport of the same SDK, this coordinator owning their ids and matching each
// response to its request. ext-tasks frames the requests (_meta: protocol version, client
// info and capabilities with the tasks extension); the transport derives the
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers from them.
class RawDispatch {
  #transport;
  #pending = new Map();
  #next = 0;

  constructor(url, headers) {
    this.#transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
    this.#transport.onmessage = (msg) => {
      const waiter = this.#pending.get(msg?.id);
      if (waiter && ('result' in msg || 'error' in msg)) {
        this.#pending.delete(msg.id);
        waiter.resolve(msg);
      }
    };
    this.#transport.onerror = () => {}; // a failed send rejects its own dispatch
  }

  start() { return this.#transport.start(); }

  close() { return this.#transport.close(); }

  dispatch = async (request, options = {}) => {
    const id = `raw-${++this.#next}`;
    let waiter;
    const reply = new Promise((resolve, reject) => { waiter = { resolve, reject }; });
    this.#pending.set(id, waiter);
    const onAbort = () => {
      this.#pending.delete(id);
      waiter.reject(options.signal.reason instanceof Error ? options.signal.reason : new DOMException('aborted', 'AbortError'));
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      try {
        await this.#transport.send({ ...request, jsonrpc: '2.0', id }, { headers: options.context?.headers });
      } catch (e) {
        // An HTTP failure (a replica that is gone, say): ext-tasks may retry a retryable one.
        this.#pending.delete(id);
        throw new DispatchError(`MCP request failed: ${e?.message ?? e}`, true, { cause: e });
      }
      const msg = await reply;
      return 'error' in msg ? { kind: 'error', error: msg.error } : { kind: 'result', result: msg.result };
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
    }
  };
}

const connections = new Map();

// connect returns the connection for a url and token: a Client pinned to 2026-07-28 (it
// then reads the server's capabilities from server/discover) and ext-tasks' session on it.
async function connect(url, token) {
  const key = `${url} ${token}`;
  if (connections.has(key)) return connections.get(key);
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const client = new Client(clientInfo, {
    capabilities: clientCapabilities,
    versionNegotiation: { mode: { pin: protocolVersion } },
  });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  await client.connect(transport);
  const raw = new RawDispatch(url, headers);
  await raw.start();
  const session = createTaskSessionFromClient(client, {
    endpointId,
    rawDispatch: raw.dispatch,
    v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities },
    ...(job.elicit ? { onInputRequest: answer } : {}),
  });
  const conn = { client, raw, session, era: client.getProtocolEra() };
  connections.set(key, conn);
  return conn;
}

// answer accepts an elicitation with job.elicit; the session sends it with tasks/update.
async function answer(request, context) {
  if (request.kind !== 'elicitation') throw new Error(`unexpected input request ${request.kind}`);
  out.elicited.push({ taskId: context.taskId, message: request.params?.message });
  return { action: 'accept', content: { text: job.elicit } };
}

const failure = (e) => ({ code: e?.code ?? null, message: String(e?.message ?? e), name: e?.name ?? '' });
const executions = new Map();
let lastTaskId = '';
const out = { steps: [], elicited: [] };

for (const step of job.steps) {
  const seen = { op: step.op };
  try {
    const conn = await connect(step.url ?? job.url, step.token ?? job.token ?? '');
    seen.era = conn.era;
    const taskId = step.taskId ?? lastTaskId;
    switch (step.op) {
      case 'call': {
        const ex = await conn.session.callTool(step.tool, step.args ?? {}, { requestTimeoutMs: 60000 });
        executions.set(step.as ?? 'last', ex);
        seen.kind = ex.kind;
        if (ex.kind === 'task') {
          seen.taskId = lastTaskId = ex.handle.taskId;
          const first = await nextTask(ex);
          seen.status = first?.status;
        }
        break;
      }
      case 'resume': {
        const ex = await conn.session.resumeTask({ endpointId, generation: 'v2', taskId, originalOperation: 'tools/call' },
          { requestTimeoutMs: 60000 });
        executions.set(step.as ?? 'last', ex);
        seen.kind = ex.kind;
        seen.taskId = lastTaskId = ex.handle.taskId;
        break;
      }
      case 'settle': {
        const ex = executions.get(step.of ?? 'last');
        if (!ex) throw new Error(`no execution ${step.of ?? 'last'}`);
        const { outcome, lastTask } = await ex.settle();
        seen.outcome = { status: outcome.status };
        if (outcome.status === 'completed') seen.outcome.result = outcome.result;
        if (outcome.status === 'failed') seen.outcome.error = failure(outcome.error);
        seen.lastStatus = lastTask?.status;
        break;
      }
      case 'get': {
        const task = await conn.session.task(taskId, { requestTimeoutMs: 60000 }).snapshot();
        seen.task = { taskId: task.taskId, status: task.status, statusMessage: task.statusMessage };
        break;
      }
      case 'cancel':
        await conn.session.task(taskId, { requestTimeoutMs: 60000 }).cancel();
        break;
      default:
        throw new Error(`unknown op ${step.op}`);
    }
  } catch (e) {
    seen.error = failure(e);
  }
  out.steps.push(seen);
}

for (const { client, raw, session } of connections.values()) {
  await session.close().catch(() => {});
  await raw.close().catch(() => {});
  await client.close().catch(() => {});
}
console.log(JSON.stringify(out));
process.exit(0);

// nextTask is the first task view an execution shows (the one tools/call returned).
async function nextTask(ex) {
  for await (const ev of ex.updates()) {
    if (ev.type === 'task') return ev.task;
    return undefined;
  }
  return undefined;
}
