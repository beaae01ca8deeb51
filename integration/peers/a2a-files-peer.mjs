// A2A agent that answers with file artifacts, for the tests of Baton's MCP server (file
// artifacts as embedded resources). @a2a-js/sdk 1.3.0, A2A v1.0 over JSON-RPC.
//
// The first word of the user's text picks the answer; each completes the task:
//   files    one artifact with a text part, an inline text file (report.txt, text/plain,
//            "hello from the file") and an inline binary file (bytes.bin,
//            application/octet-stream, the 256 byte values 0..255)
//   link     one artifact with a text part and a file given by URL (https://example.com/big.pdf)
//   bigfile  one artifact with an inline file of BIG_FILE_BYTES (default 1 MiB + 1) bytes of 'x'
//
//   PORT=41250 node a2a-files-peer.mjs
// GET /test/log returns {tasks: {taskId: "TASK_STATE_…"}}.
import express from 'express';
import { randomUUID } from 'node:crypto';
import { A2A_PROTOCOL_VERSION, AGENT_CARD_PATH, TaskState, Role } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

const PORT = Number(process.env.PORT || 41250);
const BIG = Number(process.env.BIG_FILE_BYTES || 1024 * 1024 + 1);
const base = `http://127.0.0.1:${PORT}`;

const card = {
  name: 'files-agent', description: 'Answers with files', version: '1.0.0',
  supportedInterfaces: [{ url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: A2A_PROTOCOL_VERSION }],
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {}, securityRequirements: [],
  defaultInputModes: ['text'], defaultOutputModes: ['text', 'application/octet-stream'],
  skills: [{ id: 'files', name: 'files', description: 'first word picks the files', tags: ['test'],
    examples: ['files', 'link', 'bigfile'], inputModes: ['text'], outputModes: ['text'], securityRequirements: [] }],
  documentationUrl: '', signatures: [],
};

const part = (content, filename = '', mediaType = '') => ({ content, metadata: undefined, filename, mediaType });
const text = (t) => part({ $case: 'text', value: t }, '', 'text/plain');
const log = { tasks: {} };

class RecordingTaskStore extends InMemoryTaskStore {
  async save(task, context) {
    log.tasks[task.id] = TaskState[task.status?.state] ?? String(task.status?.state);
    return super.save(task, context);
  }
}

class FilesExecutor {
  cancelTask = async () => {};

  async execute(ctx, bus) {
    const { taskId, contextId, userMessage } = ctx;
    const said = userMessage.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join(' ').trim();
    const now = () => new Date().toISOString();
    bus.publish(AgentEvent.task({ id: taskId, contextId, artifacts: [], history: [userMessage], metadata: {},
      status: { state: TaskState.TASK_STATE_WORKING, timestamp: now(), message: undefined } }));
    let parts;
    switch (said.split(/\s+/)[0]) {
      case 'link':
        parts = [text('here is the link'), part({ $case: 'url', value: 'https://example.com/big.pdf' }, 'big.pdf', 'application/pdf')];
        break;
      case 'bigfile':
        parts = [text('here is a big file'), part({ $case: 'raw', value: Buffer.alloc(BIG, 'x') }, 'big.bin', 'application/octet-stream')];
        break;
      default:
        parts = [text('here are the files'),
          part({ $case: 'raw', value: Buffer.from('hello from the file') }, 'report.txt', 'text/plain'),
          part({ $case: 'raw', value: Buffer.from([...Array(256).keys()]) }, 'bytes.bin', 'application/octet-stream')];
    }
    bus.publish(AgentEvent.artifactUpdate({ taskId, contextId, append: false, lastChunk: true, metadata: {},
      artifact: { artifactId: randomUUID(), name: 'answer', description: '', parts, metadata: {}, extensions: [] } }));
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId, metadata: {},
      status: { state: TaskState.TASK_STATE_COMPLETED, timestamp: now(), message: undefined } }));
  }
}

const handler = new DefaultRequestHandler(card, new RecordingTaskStore(), new FilesExecutor());
const app = express();
app.get('/test/log', (_req, res) => res.json(log));
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
app.use('/a2a/jsonrpc', express.json({ limit: '8mb' }), jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.listen(PORT, '127.0.0.1', () => console.log(`a2a files peer on ${base}`));
