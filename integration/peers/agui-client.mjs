// Drives the official AG-UI client against a server and reports what it saw.
//
//   node agui-client.mjs <v1|legacy> <url>   < job.json
//   node agui-client.mjs <v1|legacy> --serve  < jobs (one JSON line each: {"url", "job"})
//
// --serve keeps one process for many jobs, one at a time, so that a test suite pays node's
// start and the client's import once per worker rather than once per job: each job's report is
// one line on stdout, in order, its warnings only the console lines that job printed.
//
// Lanes: v1 = @ag-ui/client 1.0.0; legacy = @ag-ui/client 0.0.59 (the version CopilotKit 1.75
// pins), installed under the alias "agui-legacy".
//
// Job (stdin, JSON):
//   threadId        required
//   runId           optional
//   messages        initial messages of the agent ([{id, role, content}, …])
//   tools, context, forwardedProps, headers   passed through
//   resume          ResumeEntry[] for the (first) run: runAgent({resume})
//   abortAfterMs    abortRun() this many ms after the run starts
//   abortOnEvent    abortRun() as soon as an event of this type is seen (e.g. "SUBAGENT_STARTED")
//   abortDelayMs    with abortOnEvent: abortRun() this many ms after that event instead of at once
//   resumeAnswers   if the run ends with an interrupt outcome, run again on the same agent with
//                   buildResumeArray(agent.pendingInterrupts, answers); answers are keyed by
//                   interrupt id, and the key "*" answers every interrupt not named explicitly
//   skipContentApply  TEXT_MESSAGE_CONTENT events are not applied to agent.messages (see onEvent)
//   again           run once more on the same agent after the first run, whatever its outcome
//                   (a stream cut mid-run, then its reconnection served as a second response)
//
// Output: ONE JSON line on stdout describing the last run:
//   {events, failed, runError, outcome, interrupts, pendingInterrupts, messages, warnings,
//    terminal, aborted, resume, runs}
// where messages is the agent's message list after the run (as the client assembled it), and
// runs holds the same fields for every run the job made (one, or two with resumeAnswers),
// and resume is the resume array the run sent (null when none; for the resumeAnswers run, what
// buildResumeArray returned).
// warnings are all console.warn/console.error lines printed while the client ran (top level:
// the whole job; in runs: that run): the client reports protocol trouble only there, and a
// conformant stream is quiet. A rejected run also logs "Agent execution failed: …" there.
//
// The client does not fail a stream that ends without a terminal event, so "terminal" is
// computed here: the last event is RUN_FINISHED or RUN_ERROR (after abortRun() the client
// synthesizes a local RUN_ERROR{code:"abort"}).

// We want the client's transformation warnings, whatever the caller's environment says. This
// runs before the client is imported (dynamic import below).
delete process.env.SUPPRESS_TRANSFORMATION_WARNINGS;

import { AsyncLocalStorage } from 'node:async_hooks';

const [lane, arg] = process.argv.slice(2);
const modules = { v1: '@ag-ui/client', legacy: 'agui-legacy' };
if (!modules[lane] || !arg) {
  console.error('usage: node agui-client.mjs <v1|legacy> <url>  < job.json');
  console.error('       node agui-client.mjs <v1|legacy> --serve  < jobs.jsonl');
  process.exit(2);
}

// Each job's console lines are its own: the job runs inside jobScope.run(its record), and the
// client's callbacks (fetch, stream reading, subscribers) inherit that async context. A line
// printed in no job's context (none expected) goes to the job in progress, if any, so that a
// stray warning can fail a test rather than vanish.
const jobScope = new AsyncLocalStorage();
let current = null;
const capture = (orig) => (...args) => {
  const line = args.map((a) => (a instanceof Error ? `${a.name}: ${a.message}` : typeof a === 'string' ? a : safeJSON(a))).join(' ');
  const rec = jobScope.getStore() ?? current;
  if (rec && !rec.done) rec.warnings.push(line);
  orig(...args); // still visible on stderr for whoever reads the test log
};
function safeJSON(v) {
  try { return JSON.stringify(v); } catch { return String(v); }
}
console.warn = capture(console.warn.bind(console));
console.error = capture(console.error.bind(console));

const { HttpAgent, buildResumeArray } = await import(modules[lane]);

const errMessage = (e) => (e instanceof Error ? e.message : typeof e === 'string' ? e : safeJSON(e));

// runJob runs one job against url and returns its report (see the header).
async function runJob(url, job) {
  const rec = { warnings: [], done: false };
  current = rec;
  try {
    return await jobScope.run(rec, () => jobRuns(url, job, rec.warnings));
  } finally {
    rec.done = true;
    current = null;
  }
}

async function jobRuns(url, job, warnings) {
  const agent = new HttpAgent({
    url,
    threadId: job.threadId,
    initialMessages: job.messages ?? [],
    ...(job.headers ? { headers: job.headers } : {}),
  });

  async function run(params) {
    const r = { events: [], failed: null, runError: null, outcome: null, interrupts: null, aborted: false,
      resume: params.resume ?? null };
    const warnedBefore = warnings.length;
    let timer;
    const abort = () => {
      if (r.aborted) return;
      r.aborted = true;
      agent.abortRun();
    };
    const subscriber = {
      onEvent: ({ event }) => {
        r.events.push(event);
        if (job.abortOnEvent && event.type === job.abortOnEvent) {
          if (job.abortDelayMs !== undefined) setTimeout(abort, job.abortDelayMs);
          else setImmediate(abort);
        }
        // The client's default handling appends each delta to its message, then deep-copies the
        // whole message list (once per event): for a 10 MiB sub-agent text that is quadratic,
        // minutes of CPU in the client alone. With skipContentApply the deltas are still parsed,
        // verified and delivered to this subscriber (and reported in events); only their
        // assembly into agent.messages is skipped (stopPropagation, the subscriber API's own).
        if (job.skipContentApply && event.type === 'TEXT_MESSAGE_CONTENT') return { stopPropagation: true };
      },
      onRunErrorEvent: ({ event }) => { r.runError = event; },
      onRunFinishedEvent: (p) => {
        r.outcome = p.outcome ?? 'success';
        r.interrupts = p.outcome === 'interrupt' ? (p.interrupts ?? []) : null;
      },
      onRunFailed: ({ error }) => { r.failed ??= errMessage(error); },
    };
    if (job.abortAfterMs !== undefined) timer = setTimeout(abort, job.abortAfterMs);
    try {
      await agent.runAgent(params, subscriber);
    } catch (e) {
      r.failed ??= errMessage(e);
    } finally {
      clearTimeout(timer);
    }
    if (r.aborted && r.failed !== null && r.runError === null && /abort/i.test(r.failed)) {
      // abortRun() before the response arrived: the client rejects with an AbortError instead of
      // synthesizing its local RUN_ERROR. Report both cases the same way.
      r.failed = null;
      r.runError = { type: 'RUN_ERROR', code: 'abort', message: 'aborted by the client before the stream started', local: true };
      r.events.push(r.runError);
    }
    const last = r.events.at(-1)?.type;
    r.terminal = last === 'RUN_FINISHED' || last === 'RUN_ERROR';
    r.pendingInterrupts = agent.pendingInterrupts ?? [];
    r.messages = agent.messages ?? [];
    r.warnings = warnings.slice(warnedBefore);
    return r;
  }

  const params = {};
  for (const k of ['runId', 'tools', 'context', 'forwardedProps', 'resume']) {
    if (job[k] !== undefined) params[k] = job[k];
  }
  const runs = [await run(params)];

  const first = runs[0];
  if (job.resumeAnswers && !first.failed && first.outcome === 'interrupt') {
    const pending = agent.pendingInterrupts ?? [];
    const answers = {};
    for (const it of pending) {
      const a = job.resumeAnswers[it.id] ?? job.resumeAnswers['*'];
      if (a !== undefined) answers[it.id] = a;
    }
    let resume;
    try {
      resume = buildResumeArray(pending, answers);
    } catch (e) {
      first.failed = `resumeAnswers: ${errMessage(e)}`;
    }
    if (resume) runs.push(await run({ resume }));
  } else if (job.again) {
    runs.push(await run({}));
  }
  return { ...runs.at(-1), warnings: [...warnings], runs };
}

const write = (line) => new Promise((resolve) => process.stdout.write(`${line}\n`, resolve));

if (arg === '--serve') {
  // One job at a time, in order; a bad line is answered with {"error"} and the worker goes on.
  const { createInterface } = await import('node:readline');
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (!line.trim()) continue;
    let req;
    try {
      req = JSON.parse(line);
    } catch (err) {
      await write(JSON.stringify({ error: `bad job line: ${err.message}` }));
      continue;
    }
    let out;
    try {
      out = await runJob(req.url, req.job ?? {});
    } catch (err) {
      out = { error: errMessage(err) };
    }
    await write(JSON.stringify(out));
  }
  process.exit(0);
} else {
  let job;
  try {
    let input = '';
    for await (const chunk of process.stdin) input += chunk;
    job = JSON.parse(input);
  } catch (err) {
    console.error(`agui-client: bad job on stdin: ${err.message}`);
    process.exit(2);
  }
  const out = await runJob(arg, job);
  process.stdout.write(`${JSON.stringify(out)}\n`, () => process.exit(0));
}
