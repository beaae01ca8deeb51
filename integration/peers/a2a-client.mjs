// A2A client for Baton's integration tests (@a2a-js/sdk 1.3.0): runs one scenario against
// an A2A agent (Baton with a2a_server enabled) and prints one JSON line with what it saw.
//
//   node a2a-client.mjs '{"base":"http://127.0.0.1:8080","wire":"JSONRPC","scenario":"complete"}'
//
// wire: JSONRPC | HTTP+JSON (the transport the client prefers from the card).
// scenario:
//   complete     streams "peer: complete": {state, artifact}
//   fail         streams "refuse: now": {state, text}
//   input        streams "peer: input" (input-required), answers "blue" on the task:
//                {asked, question, data, state}
//   cancel       streams "peer: slow", cancels the task once it exists: {state}
//   resubscribe  streams "peer: drop", drops the stream after the task event, resubscribes
//                and reads to the end, then GetTask: {resubscribed, state}
//   list         two tasks in one context, ListTasks by contextId one per page:
//                {pages: [[taskId]...], taskIds: [..]}
//   intruder     with job.token (the owner's bearer token) and job.other (another
//                principal's): the owner streams "slow: <words>" and leaves the stream once
//                the task exists; the other principal resubscribes to it and sends a message
//                to it, while it runs and after the owner cancelled it, and does the same
//                with a task id that does not exist: {taskId, live: {...}, ended: {...},
//                none: {...}}, each {subscribe, send, sendStream} the error message or
//                "answered: <what it got>"
//   long         streams "long: <job.size>": {state, length, answer, events, ms} (answer:
//                whether the text is "abc " repeated; events: how many the stream had; ms:
//                how long it took)
//   capped       the owner (job.token) streams "slow: <words>", leaves the stream once the
//                task exists and resubscribes to it; so does job.other with a task of its
//                own: {owner, other} each the error's message or "answered"; both tasks are
//                cancelled
//   flood        sends job.count messages "slow: <words>" at once (returnImmediately), then
//                cancels the tasks it got: {started, errors: [message]}
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';

const job = JSON.parse(process.argv[2]);

// clientFor is the SDK's client for the card at job.base, sending token (when set) as a
// bearer token on every call.
async function clientFor(token) {
  const fetchImpl = (url, init = {}) => {
    const headers = new Headers(init.headers);
    if (token) headers.set('Authorization', `Bearer ${token}`);
    return fetch(url, { ...init, headers });
  };
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    preferredTransports: [job.wire],
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
  }));
  return factory.createFromUrl(job.base);
}
const client = await clientFor(job.token);

const textPart = (t) => ({ content: { $case: 'text', value: t }, metadata: undefined, filename: '', mediaType: 'text/plain' });
const message = (t, task) => ({
  messageId: randomUUID(), role: Role.ROLE_USER, parts: [textPart(t)],
  taskId: task?.taskId ?? '', contextId: task?.contextId ?? '', metadata: undefined, extensions: [], referenceTaskIds: [],
});
const send = (msg) => ({ tenant: '', message: msg, configuration: undefined, metadata: undefined });
const stateName = (s) => (typeof s === 'number' ? TaskState[s] : s);

// read follows a stream to its end (or until stop returns true) and folds what it saw.
async function read(stream, stop) {
  const seen = { taskId: '', contextId: '', states: [], artifact: '', status: undefined };
  for await (const ev of stream) {
    const p = ev.payload;
    if (!p) continue;
    if (p.$case === 'task') {
      seen.taskId = p.value.id; seen.contextId = p.value.contextId;
      seen.states.push(stateName(p.value.status?.state)); seen.status = p.value.status;
    } else if (p.$case === 'statusUpdate') {
      seen.taskId = p.value.taskId; seen.contextId = p.value.contextId;
      seen.states.push(stateName(p.value.status?.state)); seen.status = p.value.status;
    } else if (p.$case === 'artifactUpdate') {
      for (const part of p.value.artifact?.parts ?? []) {
        if (part.content?.$case === 'text') seen.artifact += part.content.value;
      }
    }
    if (stop && stop(seen)) break;
  }
  seen.state = seen.states[seen.states.length - 1];
  return seen;
}

const partsOf = (status) => status?.message?.parts ?? [];
const textOf = (status) => partsOf(status).filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('\n');
const dataOf = (status) => partsOf(status).filter((p) => p.content?.$case === 'data').map((p) => p.content.value);

let out;
switch (job.scenario) {
  case 'complete': {
    const r = await read(client.sendMessageStream(send(message('peer: complete'))));
    out = { state: r.state, artifact: r.artifact, taskId: r.taskId };
    break;
  }
  case 'fail': {
    const r = await read(client.sendMessageStream(send(message('refuse: now'))));
    out = { state: r.state, text: textOf(r.status) };
    break;
  }
  case 'input': {
    const r = await read(client.sendMessageStream(send(message('peer: input'))));
    const r2 = await read(client.sendMessageStream(send(message('blue', r))));
    out = { asked: r.state, question: textOf(r.status), data: dataOf(r.status), state: r2.state, artifact: r2.artifact };
    break;
  }
  case 'cancel': {
    const r = await read(client.sendMessageStream(send(message('peer: slow'))), (s) => s.taskId !== '');
    await new Promise((res) => setTimeout(res, Number(job.waitMs || 0)));
    const t = await client.cancelTask({ tenant: '', id: r.taskId, metadata: undefined });
    out = { state: stateName(t.status?.state), text: textOf(t.status), taskId: r.taskId };
    break;
  }
  case 'resubscribe': {
    const r = await read(client.sendMessageStream(send(message('peer: drop'))), (s) => s.taskId !== '');
    let again = { states: [] };
    try {
      again = await read(client.resubscribeTask({ tenant: '', id: r.taskId }));
    } catch (e) {
      again.error = String(e?.message ?? e);
    }
    const t = await client.getTask({ tenant: '', id: r.taskId, historyLength: undefined });
    out = { resubscribed: again.states, resubscribeError: again.error, state: stateName(t.status?.state) };
    break;
  }
  case 'list': {
    const a = await read(client.sendMessageStream(send(message('peer: complete'))));
    const b = await read(client.sendMessageStream(send(message('peer: complete', { contextId: a.contextId }))));
    const pages = [];
    let token = '';
    do {
      const page = await client.listTasks({ tenant: '', contextId: a.contextId, status: 0, pageSize: 1, pageToken: token, statusTimestampAfter: undefined, includeArtifacts: false });
      pages.push(page.tasks.map((t) => t.id));
      token = page.nextPageToken;
    } while (token && pages.length < 5);
    out = { pages, taskIds: [a.taskId, b.taskId], contexts: [a.contextId, b.contextId] };
    break;
  }
  case 'intruder': {
    const other = await clientFor(job.other);
    const r = await read(client.sendMessageStream(send(message('slow: ' + 'word '.repeat(200)))), (s) => s.taskId !== '');
    // tries is what the other principal gets for the task: an error's message (its
    // timestamp left out: it is when the error was made), or what it was answered.
    const errorText = (e) => String(e?.message ?? e).replace(/"timestamp":"[^"]*"/g, '"timestamp":"-"');
    const tries = async (task) => {
      const out = {};
      try {
        const got = await read(other.resubscribeTask({ tenant: '', id: task.taskId }));
        out.subscribe = `answered: ${JSON.stringify(got.states)} ${got.artifact}`;
      } catch (e) {
        out.subscribe = errorText(e);
      }
      try {
        const got = await other.sendMessage(send(message('hello', task)));
        out.send = `answered: ${JSON.stringify(got)}`;
      } catch (e) {
        out.send = errorText(e);
      }
      try {
        const got = await read(other.sendMessageStream(send(message('hello', task))));
        out.sendStream = `answered: ${JSON.stringify(got.states)} ${got.artifact}`;
      } catch (e) {
        out.sendStream = errorText(e);
      }
      return out;
    };
    const live = await tries(r);
    const none = await tries({ taskId: randomUUID(), contextId: r.contextId });
    let cancelled;
    try {
      const t = await client.cancelTask({ tenant: '', id: r.taskId, metadata: undefined });
      cancelled = stateName(t.status?.state);
    } catch (e) {
      cancelled = String(e?.message ?? e);
    }
    const ended = await tries(r);
    out = { taskId: r.taskId, live, ended, none, cancelled };
    break;
  }
  case 'long': {
    let events = 0;
    const began = Date.now();
    const r = await read(client.sendMessageStream(send(message(`long: ${job.size}`))), () => { events++; return false; });
    out = { state: r.state, length: r.artifact.length, answer: r.artifact === 'abc '.repeat(job.size / 4), events, ms: Date.now() - began };
    break;
  }
  case 'capped': {
    const other = await clientFor(job.other);
    const follow = async (c) => {
      const r = await read(c.sendMessageStream(send(message('slow: ' + 'word '.repeat(200)))), (s) => s.taskId !== '');
      let got;
      try {
        const again = await read(c.resubscribeTask({ tenant: '', id: r.taskId }), () => true);
        got = `answered: ${JSON.stringify(again.states)}`;
      } catch (e) {
        got = String(e?.message ?? e);
      }
      try { await c.cancelTask({ tenant: '', id: r.taskId, metadata: undefined }); } catch { /* ended already */ }
      return got;
    };
    out = { owner: await follow(client), other: await follow(other) };
    break;
  }
  case 'flood': {
    const calls = [];
    for (let i = 0; i < job.count; i++) {
      const req = send(message('slow: ' + 'word '.repeat(200)));
      req.configuration = { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: true };
      calls.push(client.sendMessage(req).then((t) => ({ task: t }), (e) => ({ error: String(e?.message ?? e) })));
    }
    const results = await Promise.all(calls);
    const started = results.filter((r) => r.task).map((r) => r.task);
    for (const t of started) {
      const id = t.id ?? t.task?.id ?? t.payload?.value?.id;
      try { await client.cancelTask({ tenant: '', id, metadata: undefined }); } catch { /* ended already */ }
    }
    out = { started: started.length, errors: results.filter((r) => r.error).map((r) => r.error) };
    break;
  }
  default:
    throw new Error(`unknown scenario ${job.scenario}`);
}
process.stdout.write(JSON.stringify(out) + '\n');
