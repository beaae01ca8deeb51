// An A2A agent that asks for input the way Google ADK does (@a2a-js/sdk 1.3.0 server, so the
// wire is the SDK's, not ours). Written from shared/reference/adk-a2a.md, which was captured
// from a real ADK Go agent (adk-go server/adka2a/v2 at 0a51e153 on a2a-go/v2 v2.4.0) and read
// from ADK's source; every field below cites the section and the ADK source path it comes from.
//
// Script (first word of the user's first message):
//   ask   -> one long-running call "ask_human" (question "which colour?"), then COMPLETED with
//            an artifact "adk got: <answer>"
//   ask2  -> the same, then a second long-running call in the same task ("which size?"),
//            then COMPLETED with "adk got: <answer 1>, <answer 2>"
//   slow  -> ~10 s of WORKING artifacts unless cancelled (CancelTask ends it CANCELED)
// A reply that is not a function_response for every pending call id is refused exactly as
// ADK refuses it: INPUT_REQUIRED again, the call parts plus a text part
// `no input provided for function call ID "<id>"` marked validation_error: true.
//
// Env: PORT (default 41251). Serves A2A v1.0 JSON-RPC (and v0.3 through the SDK's compat
// layer). GET /test/log returns {answers: [{taskId, id, name, response}], refused: n,
// cancels: [taskId], tasks: {taskId: state}}.
import express from 'express';
import { randomUUID } from 'node:crypto';
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, TaskState, Role } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { duplicateInterfacesForLegacy } from '@a2a-js/sdk/compat/v0_3';

const PORT = Number(process.env.PORT || 41251);
const base = `http://127.0.0.1:${PORT}`;

// §6 (adk-go server/adka2a/v2/extension.go:42-60): every Task and status update carries the
// marker key with value true in its metadata (not in the card, not in X-A2A-Extensions).
const ADK_MARKER = 'https://google.github.io/adk-docs/a2a/a2a-extension/';

const card = {
  name: 'adk-agent', description: 'Asks for input the way Google ADK does', version: '1.0.0',
  supportedInterfaces: duplicateInterfacesForLegacy([
    { url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION },
  ], ['JSONRPC']),
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {}, securityRequirements: [],
  defaultInputModes: ['text'], defaultOutputModes: ['text'],
  skills: [{ id: 'ask', name: 'ask', description: 'asks the user through a long-running tool', tags: ['test'],
    examples: ['ask', 'ask2'], inputModes: ['text'], outputModes: ['text'], securityRequirements: [] }],
  documentationUrl: '', signatures: [],
};

const log = { answers: [], refused: 0, cancels: [], tasks: {} };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t, metadata) => ({ content: { $case: 'text', value: t }, metadata, filename: '', mediaType: 'text/plain' });
const dataPart = (value, metadata) => ({ content: { $case: 'data', value }, metadata, filename: '', mediaType: '' });

// §2 (adk-go server/adka2a/v2/parts.go:154-201, genai types.go:1358-1375): the FunctionCall
// DataPart's data is the genai struct as JSON, {id, name, args}; its part metadata is
// adk_type "function_call" and adk_is_long_running true (parts.go:31-41, 92-94).
const callPart = (id, question) => dataPart({ args: { question }, id, name: 'ask_human' },
  { adk_is_long_running: true, adk_type: 'function_call' });
// §2 (genai types.go:1441-1466; parts.go:31-41): the pending FunctionResponse the long-running
// tool returned, {id, name, response}, metadata adk_type "function_response" only.
const pendingPart = (id) => dataPart({ id, name: 'ask_human', response: { status: 'pending' } },
  { adk_type: 'function_response' });

// §1 (executor.go:209-230; metadata.go:61-84): the WORKING update carries adk_app_name,
// adk_user_id (A2A_USER_<contextId> without an authenticated user) and adk_session_id (the
// contextId), besides the marker.
const runMeta = (contextId) => ({ adk_app_name: 'adk-agent', adk_user_id: `A2A_USER_${contextId}`,
  adk_session_id: contextId, [ADK_MARKER]: true });

class RecordingTaskStore extends InMemoryTaskStore {
  async save(task, context) {
    log.tasks[task.id] = TaskState[task.status?.state] ?? String(task.status?.state);
    return super.save(task, context);
  }
}

class ADKLikeExecutor {
  running = new Set();
  cancelled = new Set();
  contexts = new Map();
  asked = new Map(); // taskId -> [{id, question}] asked so far, in order
  answers = new Map(); // taskId -> [answer text]

  cancelTask = async (taskId, bus) => {
    log.cancels.push(taskId);
    if (this.running.has(taskId)) {
      this.cancelled.add(taskId);
      return;
    }
    // §5 (executor.go:246-253): Cancel only emits CANCELED, with the marker metadata; a
    // parked (input-required) task goes CANCELED too.
    const contextId = this.contexts.get(taskId);
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, metadata: { [ADK_MARKER]: true },
      status: { state: TaskState.TASK_STATE_CANCELED, timestamp: new Date().toISOString(), message: undefined } }));
  };

  async execute(ctx, bus) {
    this.running.add(ctx.taskId);
    this.contexts.set(ctx.taskId, ctx.contextId);
    try {
      await this.run(ctx, bus);
    } finally {
      this.running.delete(ctx.taskId);
      this.cancelled.delete(ctx.taskId);
    }
  }

  // ask ends the run INPUT_REQUIRED with ADK's status message (§2, input_required.go:46-106):
  // ONE message, role agent, made by a2a.NewMessage, so with NO taskId and NO contextId,
  // holding the call and its pending response; event metadata = the marker key only.
  ask(bus, taskId, contextId, id, question, extra = []) {
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, metadata: { [ADK_MARKER]: true },
      status: { state: TaskState.TASK_STATE_INPUT_REQUIRED, timestamp: new Date().toISOString(),
        message: { role: Role.ROLE_AGENT, messageId: randomUUID(), parts: [callPart(id, question), ...extra],
          extensions: [], metadata: {}, referenceTaskIds: [] } } }));
  }

  async run(ctx, bus) {
    const { taskId, contextId, userMessage, task } = ctx;
    const status = (state, metadata) => bus.publish(AgentEvent.statusUpdate({ taskId, contextId, metadata,
      status: { state, timestamp: new Date().toISOString(), message: undefined } }));
    // §4 (task_artifact.go:90-141, metadata.go:86-117): non-partial events share one artifact
    // per run, adk_partial false plus the run metadata.
    const artifact = (t) => bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, append: false, lastChunk: true,
      metadata: { adk_partial: false, ...runMeta(contextId), adk_author: 'adk-agent', adk_invocation_id: `e-${taskId}` },
      artifact: { artifactId: randomUUID(), name: '', description: '', parts: [text(t)], metadata: {}, extensions: [] } }));

    if (task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
      // §3 (input_required.go:152-181, parts.go:284-331): the answer must be a user message
      // for the same task with a DataPart, metadata adk_type "function_response", data.id = the
      // call id, data.response an object; for EVERY pending call.
      const pending = this.asked.get(taskId) ?? [];
      const open = pending[pending.length - 1];
      const resp = userMessage.parts.find((p) => p.content?.$case === 'data' && p.metadata?.adk_type === 'function_response'
        && p.content.value?.id === open.id);
      const response = resp?.content.value?.response;
      bus.publish(AgentEvent.task(task));
      if (!resp || typeof response !== 'object' || response === null || Array.isArray(response)) {
        // §3 (input_required.go:174-177, 245-259): INPUT_REQUIRED again; the message is the
        // call parts plus the validation text marked validation_error: true; this message
        // HAS taskId/contextId.
        log.refused++;
        bus.publish(AgentEvent.statusUpdate({ taskId, contextId, metadata: { [ADK_MARKER]: true },
          status: { state: TaskState.TASK_STATE_INPUT_REQUIRED, timestamp: new Date().toISOString(),
            message: { role: Role.ROLE_AGENT, messageId: randomUUID(), taskId, contextId,
              parts: [callPart(open.id, open.question), text(`no input provided for function call ID "${open.id}"`, { validation_error: true })],
              extensions: [], metadata: {}, referenceTaskIds: [] } } }));
        return;
      }
      log.answers.push({ taskId, id: resp.content.value.id, name: resp.content.value.name, response });
      const got = [...(this.answers.get(taskId) ?? []), String(response.answer ?? JSON.stringify(response))];
      this.answers.set(taskId, got);
      status(TaskState.TASK_STATE_WORKING, runMeta(contextId));
      if (pending.length === 1 && this.contexts.get(`script:${taskId}`) === 'ask2') {
        const next = { id: 'call-ask-2', question: 'which size?' };
        this.asked.set(taskId, [...pending, next]);
        artifact(`noted: ${got[0]}`);
        this.ask(bus, taskId, contextId, next.id, next.question, [pendingPart(next.id)]);
        return;
      }
      artifact(`adk got: ${got.join(', ')}`);
      status(TaskState.TASK_STATE_COMPLETED, { [ADK_MARKER]: true });
      return;
    }

    const said = userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(' ').trim();
    const verb = said.split(/\s+/)[0];
    this.contexts.set(`script:${taskId}`, verb);
    // §1 (executor.go:349-378): Task SUBMITTED with history = [the user's message], then
    // WORKING with the run metadata.
    bus.publish(AgentEvent.task({ id: taskId, contextId, artifacts: [], history: [userMessage], metadata: { [ADK_MARKER]: true },
      status: { state: TaskState.TASK_STATE_SUBMITTED, timestamp: new Date().toISOString(), message: undefined } }));
    status(TaskState.TASK_STATE_WORKING, runMeta(contextId));
    if (verb === 'slow') {
      for (let i = 1; i <= 20; i++) {
        if (this.cancelled.has(taskId)) {
          return status(TaskState.TASK_STATE_CANCELED, { [ADK_MARKER]: true });
        }
        artifact(`step ${i}`);
        await sleep(500);
      }
      artifact('done');
      return status(TaskState.TASK_STATE_COMPLETED, { [ADK_MARKER]: true });
    }
    // §2 [ran]: a long-running tool that returns a value ({"status":"pending"}) makes ADK call
    // the model again first: its text goes to the artifact, the call and the pending response
    // to the status message.
    artifact('I need to ask you something.');
    const first = { id: 'call-ask-1', question: 'which colour?' };
    this.asked.set(taskId, [first]);
    this.ask(bus, taskId, contextId, first.id, first.question, [pendingPart(first.id)]);
  }
}

const handler = new DefaultRequestHandler(card, new RecordingTaskStore(), new ADKLikeExecutor());
const app = express();
app.get('/test/log', (_req, res) => res.json(log));
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler, legacyCompat: { enabled: true }, cache: { maxAge: 0 } }));
app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } }));
app.listen(PORT, '127.0.0.1', () => console.log(`adk peer on ${base}`));
