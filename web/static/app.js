// The Baton chat page: an AG-UI 1.0 client in plain JavaScript (DESIGN §3, §8, §9).
//
// The page keeps the thread's history (user and assistant messages, tool calls and their
// results) and sends all of it with every run, as AG-UI requires. The thread id lives in the
// URL (#thread=<id>), so a reload restores the conversation from the coordinator
// (GET agui/threads/{id}), shows its open interrupts and re-attaches to its running run. Text that sub-agents
// stream is shown attributed to them but is not part of that history: the model already
// receives the sub-agent's outcome as the tool result. Everything that comes from the
// coordinator is inserted as text, never as HTML.

import { streamRun, followRun, getJSON, uid, parseTag, tagClass, contentText, visibleText, applyPatch, HTTPError } from "./agui.js";
import { buildFields, renderFields, readPayload, isElicitation, FormError } from "./forms.js";
import { isApproval, approvalCard } from "./approval.js";
import { signInConfig, startSignIn, SignInError } from "./oidc.js";

const AGUI_URL = "agui";
// A stopped run may take a few seconds to cancel its downstream work; until then the
// thread is busy (HTTP 409) and the next message is retried for at most this long.
const BUSY_RETRY_MS = 8000;
// After a stop was taken, the page waits this long for the run's cancelled outcome on its own
// stream before it stops reading (the run is cancelled either way).
const STOP_OUTCOME_MS = 5000;

const $ = (sel) => document.querySelector(sel);

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

const ui = {
  transcript: $("#transcript"),
  composer: $("#composer"),
  input: $("#input"),
  send: $("#send"),
  stop: $("#stop"),
  status: $("#status"),
  usage: $("#usage"),
  token: $("#token"),
  newChat: $("#new-chat"),
  threads: $("#threads"),
  threadList: $("#thread-list"),
};

// THREAD_ID is the form of a thread id the coordinator accepts (DESIGN §3).
const THREAD_ID = /^[A-Za-z0-9._:-]{1,128}$/;

// threadFromURL reads the thread id from the URL's #thread=<id>; "" when there is none.
function threadFromURL() {
  const m = /^#thread=(.*)$/.exec(location.hash);
  if (!m) return "";
  let id = "";
  try {
    id = decodeURIComponent(m[1]);
  } catch (_) {
    return "";
  }
  return THREAD_ID.test(id) ? id : "";
}

// chat is the state of the thread shown on the page.
const chat = newChat();

function newChat(threadId) {
  return {
    threadId: threadId || uid("thread"),
    messages: [], // AG-UI messages sent as RunAgentInput.messages
    state: {},
    run: null, // {runId, controller, stopped, started, terminal, resume, attached}
    runsEnded: 0,
    turn: null, // the assistant message that tool calls of the current turn belong to
    texts: new Map(), // messageId → {node, msg}
    tools: new Map(), // toolCallId → card
    subagents: new Map(), // subagentRunId → block
    activities: new Map(), // messageId → {node, type, content}
    reasoning: new Map(), // messageId → node
    interrupts: [], // the open interrupts of the last run
    answers: new Map(), // interruptId → resume entry
  };
}

// ---- transcript helpers ----

function nearBottom() {
  const s = document.scrollingElement;
  return s.scrollHeight - s.scrollTop - s.clientHeight < 120;
}

// toBottom keeps the end of the transcript in view. A reader at the bottom stays there
// when something grows or is added anywhere, even inside an earlier card (a sub-agent's
// text): scrolling that node into view instead would pull the page up to the card, away from
// the newest message, the answer just given and what follows it.
function toBottom() {
  const s = document.scrollingElement;
  s.scrollTop = s.scrollHeight;
}

function append(node, parent = ui.transcript) {
  const stick = nearBottom();
  parent.appendChild(node);
  if (stick) toBottom();
  return node;
}

function notice(kind, text, detail) {
  const n = el("div", "notice " + kind);
  n.appendChild(el("span", "notice-text", text));
  if (detail) n.appendChild(el("code", "notice-detail", detail));
  return append(n);
}

function setStatus(state, text) {
  ui.status.dataset.state = state;
  ui.status.dataset.runs = String(chat.runsEnded);
  ui.status.textContent = text || state;
}

function setBusy(busy) {
  ui.send.hidden = busy;
  ui.stop.hidden = !busy;
  ui.stop.disabled = !busy;
  lockComposer();
  if (busy) setStatus("running", "running…");
  else if (chat.interrupts.length) setStatus("input", "waiting for your answer");
  else setStatus("idle", "idle");
}

function lockComposer() {
  const waiting = chat.interrupts.length > 0 && !chat.run;
  ui.input.disabled = waiting;
  ui.input.placeholder = waiting ? "Answer above to continue." : "Message Baton…";
  ui.send.disabled = waiting || !!chat.run;
}

// ---- sending ----

async function sendMessage(text) {
  text = text.trim();
  if (!text || chat.run || chat.interrupts.length) return;
  // An expired sign-in is renewed before the message leaves the composer: signing in again
  // leaves the page, and the text comes back with it.
  if (session) await session.token();
  const msg = { id: uid("user"), role: "user", content: text };
  chat.messages.push(msg);
  // The examples are for an empty chat: once it has started they would sit above it.
  for (const w of ui.transcript.querySelectorAll(".welcome")) w.remove();
  const bubble = append(el("div", "msg user"));
  bubble.appendChild(el("div", "msg-text", text));
  // What the user just sent is shown, wherever they had scrolled to; the answer then
  // follows it (append sticks to the bottom).
  bubble.scrollIntoView({ block: "end" });
  ui.input.value = "";
  autoSize();
  await runOnce({}, { userMsg: msg, bubble });
}

async function runOnce(extra, { userMsg, bubble } = {}) {
  const run = { runId: uid("run"), controller: new AbortController(), stopped: false, started: false, terminal: null, resume: !!extra.resume };
  chat.run = run;
  chat.turn = null;
  setBusy(true);
  const input = {
    threadId: chat.threadId,
    runId: run.runId,
    protocolVersion: "1.0",
    messages: chat.messages,
    state: chat.state,
    tools: [],
    context: [],
    forwardedProps: {},
    ...extra,
  };
  try {
    await postWithBusyRetry(input, run);
    if (chat.run !== run) return; // the page left this thread (New chat, another thread)
    if (!run.terminal && !run.stopped) {
      notice("error", "The connection ended before the run finished; its result is unknown.");
      markUnfinished("interrupted");
    }
  } catch (e) {
    if (chat.run !== run) return; // the page left this thread: nothing to show here
    if (run.stopped || (e && e.name === "AbortError")) {
      notice("stopped", "Stopped. The coordinator cancels the work in progress, sub-agent tasks included.");
      markUnfinished("stopped");
    } else if (e instanceof HTTPError) {
      notice("error", e.message, e.code);
      if (e.status === 401 && !session) {
        $("#settings").open = true;
        ui.token.focus();
      }
      if (userMsg) {
        // The run never started: the message did not reach the model.
        chat.messages = chat.messages.filter((m) => m !== userMsg);
        if (bubble) bubble.classList.add("undelivered");
      }
      if (run.resume) reopenInterrupts();
    } else {
      notice("error", "Cannot reach the coordinator.", String((e && e.message) || e));
      markUnfinished("interrupted");
      if (run.resume) reopenInterrupts();
    }
  } finally {
    endRun(run);
  }
}

// endRun ends run on the page; a run of a thread the page has left changes nothing but
// the count of ended runs.
function endRun(run) {
  chat.runsEnded++;
  if (chat.run === run) {
    chat.run = null;
    chat.turn = null;
  }
  setBusy(!!chat.run);
  loadThreads();
  refreshUsage(chat.threadId);
}

// attach follows a run of this thread that is going on without this page (after a reload
// or a switch): the reconnect stream replays it from its start (?after=0), then streams it
// live until its terminal event.
async function attach(runId, left) {
  const run = { runId, controller: new AbortController(), stopped: false, terminal: null, resume: false, attached: true, left: !!left };
  chat.run = run;
  chat.turn = null;
  setBusy(true);
  const url = `${AGUI_URL}/threads/${encodeURIComponent(chat.threadId)}/runs/${encodeURIComponent(runId)}/events?after=0`;
  try {
    await authed((tok) => followRun(url, { signal: run.controller.signal, token: tok, onEvent: (ev) => handle(ev, run) }));
    if (chat.run === run && !run.terminal) {
      notice("error", "The connection ended before the run finished; reload to follow it again.");
      markUnfinished("interrupted");
    }
  } catch (e) {
    if (chat.run === run && !(e && e.name === "AbortError")) {
      notice("error", e instanceof HTTPError ? e.message : "Cannot reach the coordinator.", e instanceof HTTPError ? e.code : String((e && e.message) || e));
      markUnfinished("interrupted");
    }
  } finally {
    endRun(run);
  }
}

async function postWithBusyRetry(input, run) {
  const deadline = Date.now() + BUSY_RETRY_MS;
  let renewed = false;
  for (let wait = 250; ; wait = Math.min(wait * 2, 1000)) {
    try {
      return await streamRun(AGUI_URL, input, { signal: run.controller.signal, token: await token(), onEvent: (ev) => handle(ev, run) });
    } catch (e) {
      // A refused sign-in token is renewed once; the run had not started, so it is sent again.
      if (refusedSignIn(e) && !renewed) {
        renewed = true;
        if (await session.refused()) continue;
      }
      if (!(e instanceof HTTPError) || e.code !== "THREAD_BUSY" || Date.now() + wait > deadline) throw e;
      setStatus("running", "waiting for the previous run to end…");
      await new Promise((resolve, reject) => {
        const t = setTimeout(resolve, wait);
        run.controller.signal.addEventListener("abort", () => {
          clearTimeout(t);
          reject(new DOMException("aborted", "AbortError"));
        }, { once: true });
      });
    }
  }
}

// stopRun stops the thread's run through the stop endpoint (DESIGN §3), whether this page
// POSTed it or follows it: under server.on_disconnect: detach closing the page's own request
// would only detach the run, which then goes on until the reconnect grace runs out. The
// stream then ends with the run's cancelled outcome. The page's own stream is also aborted:
// at once when the run has not started (there is nothing to stop yet), when the stop is not
// taken, when the page has left the thread, or when the outcome does not follow soon.
function stopRun() {
  const run = chat.run;
  if (!run) return;
  if (run.stopped && !run.attached) {
    run.controller.abort(); // Stop pressed again: stop waiting for the outcome
    return;
  }
  run.stopped = true;
  if (!run.attached && !run.started) {
    run.controller.abort();
    return;
  }
  setStatus("running", "stopping…");
  requestStop(run).then((ok) => {
    if (run.attached || run.terminal) return;
    if (!ok || chat.run !== run) {
      run.controller.abort();
      return;
    }
    setTimeout(() => {
      if (!run.terminal) run.controller.abort();
    }, STOP_OUTCOME_MS);
  });
}

// requestStop asks the coordinator to stop run; it reports whether the stop was taken. A
// refusal is shown for a followed run only: the page's own run is stopped by its abort.
async function requestStop(run) {
  // The coordinator accepts a POST only as JSON (DESIGN §3), the stop included.
  const headers = { "Content-Type": "application/json" };
  const tok = await token();
  if (tok) headers.Authorization = "Bearer " + tok;
  const url = `${AGUI_URL}/threads/${encodeURIComponent(chat.threadId)}/runs/${encodeURIComponent(run.runId)}/stop`;
  let resp;
  try {
    resp = await fetch(url, { method: "POST", headers, body: "{}" });
  } catch (_) {
    if (run.attached && chat.run === run) notice("error", "The stop request did not reach the coordinator.");
    return false;
  }
  if (resp.ok) return true;
  if (!run.attached || chat.run !== run) return false;
  let message = "The coordinator refused the stop.";
  let code = "HTTP_" + resp.status;
  try {
    const body = await resp.json();
    if (body && body.message) message = body.message;
    if (body && body.error) code = body.error;
  } catch (_) {
    // not JSON: keep the status
  }
  notice("error", message, code);
  return false;
}

// markUnfinished marks tool calls and sub-agents that never got an outcome.
function markUnfinished(how) {
  for (const card of chat.tools.values()) {
    if (card.dataset.state === "running") {
      card.dataset.state = how;
      setBadge(card.querySelector(".badge"), how, "bad");
    }
  }
  for (const block of chat.subagents.values()) {
    if (block.dataset.state === "running") {
      block.dataset.state = how;
      block.querySelector(".sub-state").textContent = how;
    }
  }
}

// ---- events ----

function handle(ev, run) {
  if (!ev || typeof ev.type !== "string") return;
  if (chat.run !== run) return; // a run of a thread the page has left
  switch (ev.type) {
    case "RUN_STARTED":
      run.started = true;
      chat.turn = null;
      break;
    case "TEXT_MESSAGE_START":
      startText(ev.messageId, ev.role || "assistant", ev.subagentRunId, ev.name);
      break;
    case "TEXT_MESSAGE_CONTENT":
      appendText(ev.messageId, ev.delta, ev.subagentRunId);
      break;
    case "TEXT_MESSAGE_END":
      endText(ev.messageId);
      break;
    case "TEXT_MESSAGE_CHUNK":
      if (ev.messageId && !chat.texts.has(ev.messageId)) startText(ev.messageId, ev.role || "assistant", ev.subagentRunId, ev.name);
      appendText(ev.messageId || lastTextId(), ev.delta || "", ev.subagentRunId);
      break;
    case "TOOL_CALL_START":
      startTool(ev.toolCallId, ev.toolCallName, ev.parentMessageId);
      break;
    case "TOOL_CALL_ARGS":
      toolArgs(ev.toolCallId, ev.delta);
      break;
    case "TOOL_CALL_END":
      toolEnd(ev.toolCallId);
      break;
    case "TOOL_CALL_CHUNK":
      if (ev.toolCallId && !chat.tools.has(ev.toolCallId)) startTool(ev.toolCallId, ev.toolCallName, ev.parentMessageId);
      toolArgs(ev.toolCallId || lastToolId(), ev.delta || "");
      break;
    case "TOOL_CALL_RESULT":
      toolResult(ev);
      break;
    case "SUBAGENT_STARTED":
      subagentStarted(ev);
      break;
    case "SUBAGENT_FINISHED":
      subagentFinished(ev);
      break;
    case "SUBAGENT_ERROR":
      subagentError(ev);
      break;
    case "ACTIVITY_SNAPSHOT":
      activity(ev.messageId, ev.activityType, ev.content, ev.replace === false, ev.subagentRunId);
      break;
    case "ACTIVITY_DELTA": {
      const a = chat.activities.get(ev.messageId);
      if (a) {
        try {
          activity(ev.messageId, ev.activityType || a.type, applyPatch(a.content, ev.patch), false, ev.subagentRunId);
        } catch (_) {
          // a delta that does not apply is dropped; the next snapshot repairs the view
        }
      }
      break;
    }
    case "STATE_SNAPSHOT":
      chat.state = ev.snapshot === undefined ? {} : ev.snapshot;
      break;
    case "STATE_DELTA":
      try {
        chat.state = applyPatch(chat.state, ev.delta);
      } catch (_) {
        // keep the last good state
      }
      break;
    case "MESSAGES_SNAPSHOT":
      if (Array.isArray(ev.messages)) chat.messages = ev.messages.filter((m) => m && m.role !== "activity");
      break;
    case "STEP_STARTED":
      setStatus("running", "running: " + ev.stepName);
      break;
    case "STEP_FINISHED":
      setStatus("running", "running…");
      break;
    case "REASONING_MESSAGE_START":
    case "REASONING_MESSAGE_CONTENT":
    case "REASONING_MESSAGE_CHUNK":
      reasoning(ev);
      break;
    case "CUSTOM":
      custom(ev.name, ev.value);
      break;
    case "RUN_FINISHED":
      run.terminal = ev;
      runFinished(ev, run);
      break;
    case "RUN_ERROR":
      run.terminal = ev;
      runError(ev, run);
      break;
    default:
      // Unknown and purely structural events (REASONING_START/END, RAW, …) are ignored,
      // as the 1.0 client does.
      break;
  }
}

function lastTextId() {
  return [...chat.texts.keys()].pop();
}

function lastToolId() {
  return [...chat.tools.keys()].pop();
}

// ---- text ----

function startText(id, role, subagentRunId, name) {
  const known = chat.texts.get(id);
  if (known) {
    // A replayed start of a message the page already shows (restored, then replayed from
    // the run's start): its text streams again from the beginning.
    known.node.textContent = "";
    if (known.msg) known.msg.content = "";
    if (known.bubble) known.bubble.classList.add("streaming");
    return;
  }
  if (subagentRunId) {
    const block = subagentBlock(subagentRunId);
    const node = el("div", "sub-msg");
    node.dataset.messageId = id;
    block.querySelector(".sub-text").appendChild(node);
    chat.texts.set(id, { node, msg: null });
    return;
  }
  const msg = { id, role, content: "" };
  if (name) msg.name = name;
  chat.messages.push(msg);
  if (role === "assistant") chat.turn = msg;
  const bubble = append(el("div", "msg " + (role === "user" ? "user" : "assistant")));
  bubble.dataset.messageId = id;
  const node = bubble.appendChild(el("div", "msg-text"));
  bubble.classList.add("streaming");
  chat.texts.set(id, { node, msg, bubble });
}

function appendText(id, delta, subagentRunId) {
  let t = chat.texts.get(id);
  if (!t) {
    startText(id, "assistant", subagentRunId);
    t = chat.texts.get(id);
  }
  if (!delta) return;
  const stick = nearBottom();
  if (t.msg) {
    // The history keeps what the model said; the user reads it without tags and notes.
    t.msg.content += delta;
    t.node.textContent = visibleText(t.msg.content);
  } else {
    t.node.textContent += delta;
  }
  if (stick) toBottom();
}

function endText(id) {
  const t = chat.texts.get(id);
  if (t && t.bubble) t.bubble.classList.remove("streaming");
}

// ---- tool calls ----

function startTool(id, name, parentMessageId) {
  const known = chat.tools.get(id);
  if (known) {
    // A replayed start of a call the page already shows: its arguments stream again.
    known._call.function.arguments = "";
    known.querySelector(".args").textContent = "";
    return;
  }
  let parent = parentMessageId ? chat.messages.find((m) => m.id === parentMessageId && m.role === "assistant") : null;
  if (!parent) parent = chat.turn;
  if (!parent) {
    parent = { id: parentMessageId || uid("msg"), role: "assistant", content: "" };
    chat.messages.push(parent);
  }
  parent.toolCalls = parent.toolCalls || [];
  const call = { id, type: "function", function: { name, arguments: "" } };
  parent.toolCalls.push(call);
  chat.turn = parent;

  const card = el("details", "tool");
  card.open = true;
  card.dataset.toolCallId = id;
  card.dataset.name = name;
  card.dataset.state = "running";
  const summary = card.appendChild(el("summary"));
  summary.appendChild(el("span", "tool-icon", "⚙"));
  summary.appendChild(el("span", "tool-name", name));
  setBadge(summary.appendChild(el("span", "badge")), "running…", "running");
  const body = card.appendChild(el("div", "tool-body"));
  body.appendChild(el("div", "label", "arguments"));
  body.appendChild(el("pre", "args"));
  body.appendChild(el("div", "subagents"));
  body.appendChild(el("div", "activities"));
  const result = body.appendChild(el("div", "result"));
  result.hidden = true;
  result.appendChild(el("div", "label", "result"));
  result.appendChild(el("pre", "result-text"));
  // A retry signal is shown in words; the JSON the model got is one click away.
  const raw = result.appendChild(el("details", "result-raw"));
  raw.hidden = true;
  raw.appendChild(el("summary", "", "Show what the model was sent (JSON)"));
  raw.appendChild(el("pre", "result-json"));
  card._call = call;
  chat.tools.set(id, card);
  append(card);
}

function toolArgs(id, delta) {
  const card = chat.tools.get(id);
  if (!card || !delta) return;
  card._call.function.arguments += delta;
  card.querySelector(".args").textContent = card._call.function.arguments;
}

function toolEnd(id) {
  const card = chat.tools.get(id);
  if (!card) return;
  const args = card._call.function.arguments;
  try {
    card.querySelector(".args").textContent = JSON.stringify(JSON.parse(args || "{}"), null, 2);
  } catch (_) {
    // not JSON: shown as sent
  }
}

function toolResult(ev) {
  const content = contentText(ev.content);
  // A replayed result the history already holds is not added twice.
  const seen = chat.messages.some((m) => m.role === "tool" && (ev.messageId ? m.id === ev.messageId : m.toolCallId === ev.toolCallId));
  if (!seen) chat.messages.push({ id: ev.messageId || uid("tool"), role: "tool", toolCallId: ev.toolCallId, content });
  chat.turn = null;
  let card = chat.tools.get(ev.toolCallId);
  if (!card) {
    // A result for a call of an earlier page load, or of a resumed run the page did not see.
    startTool(ev.toolCallId, "tool", undefined);
    card = chat.tools.get(ev.toolCallId);
  }
  const { tag, arg, body } = parseTag(content);
  const label = tag === "RETRY" ? "RETRY:" + arg : tag || "result";
  const cls = tagClass(tag);
  card.dataset.state = "done";
  card.dataset.tag = tag;
  setBadge(card.querySelector(".badge"), label, cls);
  const result = card.querySelector(".result");
  result.hidden = false;
  let shown = content;
  const raw = result.querySelector(".result-raw");
  raw.hidden = true;
  if (tag === "RETRY") {
    try {
      const sig = JSON.parse(body);
      shown = retryWords(sig);
      raw.querySelector(".result-json").textContent = `[${label}]\n` + JSON.stringify(sig, null, 2);
      raw.hidden = false;
    } catch (_) {
      // not JSON: kept as sent
    }
  }
  result.querySelector(".result-text").textContent = shown;
  // Finished calls fold away unless they need attention; a reader at the bottom stays there.
  if (cls === "ok" && !card._userToggled) {
    const stick = nearBottom();
    card.open = false;
    if (stick) toBottom();
  }
}

// retryWords is a retry signal ([RETRY:code] {json}, written for the model) in the user's
// words: what went wrong, the argument at fault, and whether the model can try again.
function retryWords(sig) {
  if (!sig || typeof sig !== "object") return "The call failed.";
  const str = (v) => (typeof v === "string" && v.trim() ? v.trim() : "");
  const lines = [];
  const said = str(sig.error_message);
  lines.push(said ? "The call failed: " + said : str(sig.message) || "The call failed.");
  const d = sig.details && typeof sig.details === "object" ? sig.details : null;
  if (d && str(d.field)) lines.push(`The argument “${d.field}” was ${JSON.stringify(d.got)}.`);
  if (str(sig.reason)) lines.push(str(sig.reason));
  const r = sig.resolution && typeof sig.resolution === "object" ? sig.resolution : null;
  if (r && typeof r.retry_after_seconds === "number" && r.retry_after_seconds > 0) {
    lines.push(`It can be called again in ${Math.ceil(r.retry_after_seconds)} s.`);
  }
  const left = sig.attempts_left;
  if (Number.isInteger(left) && left <= 0) lines.push("The model has no tries left for it.");
  else if (Number.isInteger(left)) lines.push(`The model can correct the call and try again (${left} ${left === 1 ? "try" : "tries"} left).`);
  else lines.push("The model can correct the call and try again.");
  return lines.join("\n");
}

function setBadge(badge, text, cls) {
  badge.textContent = text;
  badge.dataset.kind = cls;
}

// ---- sub-agents ----

function subagentBlock(id, name) {
  let block = chat.subagents.get(id);
  if (block) return block;
  block = el("section", "subagent");
  block.dataset.subagentRunId = id;
  block.dataset.name = name || id;
  block.dataset.state = "running";
  const head = block.appendChild(el("header"));
  head.appendChild(el("span", "who", name || id));
  head.appendChild(el("span", "role-tag", "sub-agent"));
  head.appendChild(el("span", "sub-state", "working…"));
  block.appendChild(el("div", "sub-text"));
  block.appendChild(el("div", "activities"));
  chat.subagents.set(id, block);
  append(block);
  return block;
}

function subagentStarted(ev) {
  let block = chat.subagents.get(ev.subagentRunId);
  if (!block) {
    block = subagentBlock(ev.subagentRunId, ev.name);
    const card = ev.parentToolCallId && chat.tools.get(ev.parentToolCallId);
    if (card) {
      card.querySelector(".subagents").appendChild(block);
      card.classList.add("delegation");
      card.querySelector(".tool-icon").textContent = "↪";
    }
  }
  block.dataset.name = ev.name || block.dataset.name;
  block.querySelector(".who").textContent = ev.name || block.dataset.name;
  if (ev.description) block.title = ev.description;
  block.dataset.state = "running";
  block.querySelector(".sub-state").textContent = "working…";
}

function subagentFinished(ev) {
  const block = subagentBlock(ev.subagentRunId);
  const suspended = ev.outcome && ev.outcome.type === "suspended";
  block.dataset.state = suspended ? "suspended" : "finished";
  block.querySelector(".sub-state").textContent = suspended ? "waiting for input" : "finished";
}

function subagentError(ev) {
  const block = subagentBlock(ev.subagentRunId);
  block.dataset.state = "error";
  block.dataset.code = ev.code || "";
  block.querySelector(".sub-state").textContent = "failed"; // the code is in data-code
  block.appendChild(el("div", "sub-error", ev.message || "The sub-agent failed."));
}

// ---- activities (MCP progress) ----

function activity(id, type, content, merge, subagentRunId) {
  let a = chat.activities.get(id);
  const c = merge && a ? { ...a.content, ...content } : content || {};
  if (!a) {
    const node = el("div", "activity");
    node.dataset.activityId = id;
    node.dataset.type = type;
    const card = c.toolCallId && chat.tools.get(c.toolCallId);
    const host = card ? card.querySelector(".activities") : subagentRunId ? subagentBlock(subagentRunId).querySelector(".activities") : ui.transcript;
    if (host === ui.transcript) append(node);
    else host.appendChild(node);
    a = { node, type, content: c };
    chat.activities.set(id, a);
  }
  a.content = c;
  a.type = type || a.type;
  const node = a.node;
  node.replaceChildren();
  if (a.type === "progress") {
    const bar = node.appendChild(el("progress"));
    const p = Number(c.progress);
    const total = Number(c.total);
    if (Number.isFinite(total) && total > 0) {
      bar.max = total;
      bar.value = Math.min(Number.isFinite(p) ? p : 0, total);
    } // no total: indeterminate
    const parts = [];
    if (c.message) parts.push(c.message);
    if (Number.isFinite(p)) parts.push(Number.isFinite(total) && total > 0 ? `${p}/${total}` : String(p));
    node.appendChild(el("span", "activity-label", parts.join(" · ")));
  } else {
    node.appendChild(el("span", "activity-label", a.type));
    node.appendChild(el("code", "activity-content", JSON.stringify(c)));
  }
}

// ---- reasoning ----

function reasoning(ev) {
  let node = chat.reasoning.get(ev.messageId);
  if (!node) {
    const box = el("details", "reasoning");
    box.appendChild(el("summary", "", "reasoning"));
    node = box.appendChild(el("div", "reasoning-text"));
    chat.reasoning.set(ev.messageId, node);
    append(box);
  }
  if (ev.delta) node.textContent += ev.delta;
}

// ---- custom events ----

function custom(name, value) {
  const v = value && typeof value === "object" ? value : {};
  switch (name) {
    case "baton.failure": {
      // The kind and action are for tools and tests (data attributes); the user reads
      // what happened and what Baton does about it.
      const n = notice("failure", failureText(v));
      n.dataset.kind = typeof v.kind === "string" ? v.kind : "";
      n.dataset.action = typeof v.action === "string" ? v.action : "";
      if (Number.isInteger(v.attempt)) n.dataset.attempt = String(v.attempt);
      break;
    }
    case "baton.budget_warning": {
      const n = notice("budget", budgetWarningText(v));
      n.dataset.budget = typeof v.budget === "string" ? v.budget : "";
      n.dataset.unit = typeof v.unit === "string" ? v.unit : "";
      break;
    }
    case "baton.usage":
      // A run another Baton started reports its usage to that caller; the header shows
      // the thread's totals once the run has ended.
      break;
    case "baton.handoff":
    case "baton.partial": {
      const panel = el("section", "handoff " + (name === "baton.handoff" ? "is-handoff" : "is-partial"));
      panel.dataset.name = name;
      panel.appendChild(el("h3", "", name === "baton.handoff" ? "Handed back to you" : "Stopped with a partial result"));
      if (v.rationale) panel.appendChild(el("p", "", v.rationale));
      for (const [key, title] of [["blockers", "Blockers"], ["next_steps", "Next steps"]]) {
        if (Array.isArray(v[key]) && v[key].length) {
          panel.appendChild(el("h4", "", title));
          const ul = panel.appendChild(el("ul"));
          for (const item of v[key]) ul.appendChild(el("li", "", typeof item === "string" ? item : JSON.stringify(item)));
        }
      }
      append(panel);
      break;
    }
    default:
      notice("custom", name, JSON.stringify(value));
  }
}

// ---- usage and budgets ----

// amount is a number of tokens or dollars as the user reads it; precise keeps dollars
// below $10 to the hundredth of a cent (what a chat costs), else cents (budgets).
function amount(n, unit, precise) {
  const v = Number.isFinite(n) ? n : 0;
  if (unit === "usd") return "$" + ((v > 0 && v < 0.01) || (precise && v < 10) ? v.toFixed(4) : v.toFixed(2));
  return Math.round(v).toLocaleString("en-US") + " tokens";
}

// budgetWarningText is a baton.budget_warning ({budget, unit, used, limit, remaining}) in
// words: whose budget, how much of it is used, and what is left.
function budgetWarningText(v) {
  const unit = v.unit === "usd" ? "usd" : "tokens";
  const limit = Number(v.limit);
  const pct = limit > 0 ? Math.round((Number(v.used) / limit) * 100) : 0;
  const whose = v.budget === "principal" ? "You have used" : "This run has used";
  const budget = v.budget === "principal" ? "your daily budget" : "its budget";
  return `${whose} ${pct}% of ${budget}: ${amount(Number(v.used), unit)} of ${amount(limit, unit)} (${amount(Number(v.remaining), unit)} left).`;
}

// showUsage shows the thread's usage ({inputTokens, outputTokens, costUsd}, as
// GET agui/threads/{id} has it) in the header; nothing used, nothing shown.
function showUsage(u) {
  const input = u && Number.isFinite(u.inputTokens) ? u.inputTokens : 0;
  const output = u && Number.isFinite(u.outputTokens) ? u.outputTokens : 0;
  const cost = u && Number.isFinite(u.costUsd) ? u.costUsd : 0;
  ui.usage.dataset.inputTokens = String(input);
  ui.usage.dataset.outputTokens = String(output);
  ui.usage.dataset.costUsd = String(cost);
  ui.usage.hidden = input + output === 0 && cost === 0;
  ui.usage.textContent = amount(input + output, "tokens") + (cost > 0 ? " · " + amount(cost, "usd", true) : "");
  ui.usage.title = `This chat so far: ${input.toLocaleString("en-US")} tokens in, ${output.toLocaleString("en-US")} out` +
    (cost > 0 ? `, ${amount(cost, "usd", true)}` : "") + " (sub-agents that are Batons included).";
}

// refreshUsage reads the thread's usage again (after a run), if it is still the one shown.
async function refreshUsage(id) {
  let doc;
  try {
    // Not authed(): a refused token is the next run's to renew, never a sign-in here.
    doc = await getJSON(`${AGUI_URL}/threads/${encodeURIComponent(id)}`, { token: await token() });
  } catch (_) {
    return; // the usage stays as it was; the thread's own errors are shown elsewhere
  }
  if (chat.threadId === id && doc) showUsage(doc.usage);
}

// FAILURE_TEXT says, per failure kind (DESIGN §6), what happened in the user's words; used
// when the event carries no explanation of its own.
const FAILURE_TEXT = {
  transient_provider: "The language model did not answer.",
  output_truncated: "The language model's reply was cut off.",
  output_refused: "The language model declined to answer.",
  tool_error: "A tool or agent reported a problem.",
  no_progress: "The work is not moving forward.",
  loop_detected: "The same step keeps repeating.",
  capability_gap: "None of the available agents or tools can do this.",
  policy_violation: "This is not allowed here.",
  ambiguous_input: "The request is not clear enough to act on.",
  iteration_limit: "The run reached its step limit.",
  time_limit: "The run reached its time limit.",
};

// failureText is a baton.failure event as the user reads it: what happened, then what
// Baton does about it.
function failureText(v) {
  const what = (typeof v.explanation === "string" && v.explanation.trim()) || FAILURE_TEXT[v.kind] || "Something went wrong.";
  const n = Number.isInteger(v.attempt) ? v.attempt : 0;
  let next = "";
  switch (v.action) {
    case "retry":
      // Baton itself calls the model again after a provider's hiccup; for a tool's
      // failure it only tells the model that it may, and the model decides.
      if (v.kind === "transient_provider") next = n > 1 ? `Trying again (retry ${n}).` : "Trying again.";
      else next = "The model can try again.";
      break;
    case "narrow_scope":
      next = "Asking the model to take a smaller step.";
      break;
    case "ask_user":
      // The explanation already says a decision is needed; the question follows.
      next = "Answer below.";
      break;
    case "handoff":
      next = "Handing this back to you.";
      break;
    case "stop":
      next = "Stopping here.";
      break;
  }
  return next ? `${what} ${next}` : what;
}

// ---- run end ----

function runFinished(ev, run) {
  const outcome = ev.outcome || { type: "success" };
  if (run.resume) closeInterrupts("answered");
  switch (outcome.type) {
    case "interrupt":
      showInterrupts(Array.isArray(outcome.interrupts) ? outcome.interrupts : []);
      break;
    case "cancelled": {
      // A run this tab left running (a reload) ends cancelled because the page went away.
      const left = run.left && !run.stopped; // not when Stop was pressed after the reload
      const n = notice("stopped", left ? "Stopped. " + LEFT_WHY : "The run was cancelled.");
      if (left) n.dataset.left = "true";
      markUnfinished(left ? "stopped" : "cancelled");
      break;
    }
    default:
      if (Array.isArray(outcome.pendingToolCallIds) && outcome.pendingToolCallIds.length) {
        notice("custom", "The model called tools that this page does not provide.", outcome.pendingToolCallIds.join(", "));
      }
  }
  // Baton's own end of a handed-back or stopped run ({stopped, action}) is told by the
  // handoff panel in words; any other result is shown as it came.
  const r = ev.result;
  const batonEnd = r && typeof r === "object" && typeof r.stopped === "string" && typeof r.action === "string";
  if (r !== undefined && r !== null && !batonEnd && !(typeof r === "object" && Object.keys(r).length === 0)) {
    notice("result", "Run result", JSON.stringify(r));
  }
}

function runError(ev, run) {
  const n = notice("error", ev.message || "The run failed.", ev.code);
  n.dataset.code = ev.code || "";
  markUnfinished("failed");
  if (run.resume) {
    if (ev.code === "INTERRUPT_EXPIRED") closeInterrupts("expired");
    else reopenInterrupts();
  }
}

// ---- interrupts ----

function showInterrupts(list) {
  closeInterrupts("superseded");
  chat.interrupts = list.filter((i) => i && i.id);
  chat.answers = new Map();
  // The calls that wait for these answers are parked, not running.
  const waiting = new Set(chat.interrupts.map((i) => i.toolCallId).filter(Boolean));
  for (const [id, card] of chat.tools) {
    const suspended = card.querySelector('.subagent[data-state="suspended"]');
    if (card.dataset.state === "running" && (waiting.has(id) || suspended)) {
      card.dataset.state = "waiting";
      setBadge(card.querySelector(".badge"), "waiting for you", "wait");
    }
  }
  for (const intr of chat.interrupts) append(interruptForm(intr));
  lockComposer();
  const first = ui.transcript.querySelector(".interrupt[data-state=open] input, .interrupt[data-state=open] textarea, .interrupt[data-state=open] select");
  if (first) first.focus();
}

function interruptForm(intr) {
  const md = intr.metadata && typeof intr.metadata === "object" ? intr.metadata : {};
  if (intr.reason === "mcp:authorization" || (intr.reason === "a2a:auth_required" && typeof md.authorizationUrl === "string")) {
    return signInCard(intr);
  }
  if (isApproval(intr)) {
    const card = approvalCard(document, intr, (entry) => answer(intr, card, entry));
    card._intr = intr;
    return card;
  }
  const box = el("section", "interrupt");
  box.dataset.interruptId = intr.id;
  box.dataset.reason = intr.reason || "";
  box.dataset.state = "open";
  const who = intr.subagentRunId && chat.subagents.get(intr.subagentRunId);
  const meta = (intr.metadata && typeof intr.metadata === "object") ? intr.metadata : {};
  const head = box.appendChild(el("header"));
  head.appendChild(el("span", "who", who ? who.dataset.name : asker(meta)));
  head.appendChild(el("span", "role-tag", reasonLabel(intr.reason)));
  box.appendChild(el("p", "question", intr.message || "Input is needed to continue."));
  const url = meta.mcp && meta.mcp.url;
  if (typeof url === "string" && /^https?:\/\//i.test(url)) {
    const link = box.appendChild(el("a", "open-url", "Open " + url));
    link.href = url;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
  }
  if (intr.expiresAt) {
    const t = new Date(intr.expiresAt);
    if (!Number.isNaN(t.getTime())) box.appendChild(el("p", "expires", "Answer before " + t.toLocaleTimeString()));
  }

  const form = box.appendChild(el("form"));
  form.noValidate = true; // our own checks give messages that name the field
  const schema = intr.responseSchema;
  const elicitation = isElicitation(schema);
  let fields;
  let area = form;
  if (elicitation) {
    const content = schema.properties.content;
    fields = content ? buildFields(content, ["content"]) : [];
    area = form.appendChild(el("div", "fields"));
  } else if (schema && typeof schema === "object" && (schema.properties || schema.type)) {
    fields = buildFields(schema);
    area = form.appendChild(el("div", "fields"));
  } else {
    // No schema: a free-text answer, sent as {text} (or {} when left empty).
    fields = buildFields({ type: "object", properties: { text: { type: "string", title: "Your answer" } } });
    area = form.appendChild(el("div", "fields"));
  }
  renderFields(document, area, fields);
  const err = form.appendChild(el("p", "form-error"));
  err.hidden = true;
  const actions = form.appendChild(el("div", "actions"));
  const submitWith = (action) => {
    err.hidden = true;
    let payload;
    if (elicitation && action !== "accept") {
      payload = { action }; // declining sends no content
    } else {
      let values;
      try {
        values = readPayload(area, fields);
      } catch (e) {
        if (!(e instanceof FormError)) throw e;
        err.textContent = e.message;
        err.hidden = false;
        return;
      }
      if (!elicitation) payload = values;
      else payload = schema.properties.content ? { action, content: values } : { action };
    }
    answer(intr, box, { interruptId: intr.id, status: "resolved", payload });
  };
  if (elicitation) {
    for (const action of schema.properties.action.enum) {
      if (action === "cancel") continue; // the Cancel button below
      const b = actions.appendChild(el("button", action === "accept" ? "primary" : "", action === "accept" ? "Accept" : action === "decline" ? "Decline" : action));
      b.type = action === "accept" ? "submit" : "button";
      b.dataset.action = action;
      if (b.type === "button") b.addEventListener("click", () => submitWith(action));
    }
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      submitWith("accept");
    });
  } else {
    const b = actions.appendChild(el("button", "primary", "Send answer"));
    b.type = "submit";
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      submitWith("resolved");
    });
  }
  const cancel = actions.appendChild(el("button", "cancel", "Cancel"));
  cancel.type = "button";
  cancel.addEventListener("click", () => answer(intr, box, { interruptId: intr.id, status: "cancelled" }));
  box._intr = intr;
  return box;
}

// signInCard is the card of an mcp:authorization interrupt: "Sign in to <server>" opens
// the authorization URL in a new window (without opener: the authorization server gets no
// handle on this page). When Baton's callback has stored the token, its page tells this one
// through localStorage (a "storage" event) and the interrupt is answered "accept", which
// retries the parked call; "Done" does the same by hand, Cancel declines.
function signInCard(intr) {
  const meta = intr.metadata && typeof intr.metadata === "object" ? intr.metadata : {};
  // An A2A agent's sign-in is kept as "a2a:<agent>" (what the callback reports).
  const agent = intr.reason === "a2a:auth_required" && meta.a2a && typeof meta.a2a.agent === "string" ? meta.a2a.agent : "";
  const server = agent || (typeof meta.server === "string" ? meta.server : "the server");
  const box = el("section", "interrupt signin");
  box.dataset.interruptId = intr.id;
  box.dataset.reason = intr.reason;
  box.dataset.state = "open";
  box.dataset.server = agent ? "a2a:" + agent : server;
  const head = box.appendChild(el("header"));
  head.appendChild(el("span", "who", agent ? agent : "MCP server " + server));
  head.appendChild(el("span", "role-tag", "needs sign-in"));
  box.appendChild(el("p", "question", agent ? "Sign in to " + agent : intr.message || "Sign in to " + server));
  if (agent && intr.message) box.appendChild(el("p", "agent-says", intr.message));
  if (intr.expiresAt) {
    const t = new Date(intr.expiresAt);
    if (!Number.isNaN(t.getTime())) box.appendChild(el("p", "expires", "Answer before " + t.toLocaleTimeString()));
  }
  const actions = box.appendChild(el("div", "actions"));
  const url = meta.authorizationUrl;
  // An MCP sign-in is accepted; an A2A task is continued ({}: "done").
  const payload = agent ? {} : { action: "accept" };
  const accept = () => answer(intr, box, { interruptId: intr.id, status: "resolved", payload });
  if (typeof url === "string" && /^https?:\/\//i.test(url)) {
    const open = actions.appendChild(el("button", "primary open-signin", "Sign in to " + server));
    open.type = "button";
    open.addEventListener("click", () => {
      window.open(url, "_blank", "noopener,noreferrer");
      box.dataset.opened = "true";
    });
  } else {
    box.appendChild(el("p", "form-error", "The server gave no usable sign-in link."));
  }
  const done = actions.appendChild(el("button", "done", "Done"));
  done.type = "button";
  done.addEventListener("click", accept);
  const cancel = actions.appendChild(el("button", "cancel", "Cancel"));
  cancel.type = "button";
  cancel.addEventListener("click", () => answer(intr, box, { interruptId: intr.id, status: "cancelled" }));
  box._intr = intr;
  box._signedIn = accept;
  return box;
}

// signedIn answers the open sign-in cards of a server once its callback reported success.
function signedIn(server) {
  for (const box of ui.transcript.querySelectorAll(".interrupt.signin[data-state=open]")) {
    if (box.dataset.server === server && typeof box._signedIn === "function") box._signedIn();
  }
}

window.addEventListener("storage", (e) => {
  if (e.key !== "baton:signed-in" || !e.newValue) return;
  try {
    const m = JSON.parse(e.newValue);
    if (m && m.type === "baton:signed-in" && typeof m.server === "string") signedIn(m.server);
  } catch {
    // not ours
  }
});
window.addEventListener("message", (e) => {
  if (e.origin !== location.origin || !e.data || e.data.type !== "baton:signed-in") return;
  if (typeof e.data.server === "string") signedIn(e.data.server);
});

// asker names who asks: the MCP server or agent the question comes from, else Baton.
function asker(meta) {
  const name = (v) => (typeof v === "string" && v ? v : "");
  if (meta.mcp && name(meta.mcp.server)) return "MCP server " + meta.mcp.server;
  if (meta.a2a && name(meta.a2a.agent)) return meta.a2a.agent;
  if (name(meta.server)) return "MCP server " + meta.server;
  return "Baton";
}

function reasonLabel(reason) {
  switch (reason) {
    case "input_required":
      return "asks";
    case "a2a:auth_required":
      return "needs sign-in";
    case "mcp:url_elicitation":
      return "needs you to open a link";
    case "mcp:authorization":
      return "needs sign-in";
    case "confirmation":
      return "asks to confirm";
    default:
      return "asks"; // the reason code is kept in data-reason, not shown
  }
}

function answer(intr, box, entry) {
  if (chat.run || box.dataset.state !== "open") return;
  chat.answers.set(intr.id, entry);
  box.dataset.state = "answered";
  for (const c of box.querySelectorAll("input, select, textarea, button")) c.disabled = true;
  let shown;
  if (entry.status === "cancelled") shown = "(cancelled)";
  else if (box.classList.contains("signin")) shown = "Signed in";
  else if (box.classList.contains("approval")) shown = approvalText(entry.payload, box.dataset.inDoubt === "true");
  else shown = answerText(entry.payload);
  const bubble = append(el("div", "msg user answer"));
  bubble.appendChild(el("div", "msg-text", shown));
  const pending = chat.interrupts.filter((i) => !chat.answers.has(i.id));
  if (pending.length) {
    setStatus("input", pending.length === 1 ? "waiting for one more answer" : `waiting for ${pending.length} more answers`);
    return;
  }
  const resume = chat.interrupts.map((i) => chat.answers.get(i.id));
  runOnce({ resume });
}

// approvalText is an approval answer in words: what the user decided, with the changed
// arguments or the reason given.
function approvalText(payload, inDoubt) {
  const p = payload && typeof payload === "object" ? payload : {};
  if (p.approved === true) {
    const head = inDoubt ? "Run it again" : "Approved";
    const edits = p.editedArgs && typeof p.editedArgs === "object" ? pairs(p.editedArgs) : "";
    return edits ? `${head}, with changes: ${edits}` : head;
  }
  const head = inDoubt ? "Not run again" : "Denied";
  return typeof p.reason === "string" && p.reason ? `${head}: ${p.reason}` : head;
}

// answerText shows an answer the way the user gave it, not as JSON.
function answerText(payload) {
  if (!payload || typeof payload !== "object") return JSON.stringify(payload);
  const keys = Object.keys(payload);
  if (typeof payload.action === "string" && keys.every((k) => k === "action" || k === "content")) {
    const head = { accept: "Accepted", decline: "Declined", cancel: "Cancelled" }[payload.action] || payload.action;
    const rest = payload.content && typeof payload.content === "object" ? pairs(payload.content) : "";
    return rest ? head + " — " + rest : head;
  }
  if (keys.length === 1 && typeof payload[keys[0]] === "string") return payload[keys[0]];
  return pairs(payload) || "(no answer)";
}

function pairs(obj) {
  return Object.entries(obj)
    .map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(", ");
}

// closeInterrupts ends the open interrupts of the page (answered and run, expired, or
// replaced by newer ones).
function closeInterrupts(how) {
  for (const box of ui.transcript.querySelectorAll(".interrupt")) {
    if (box.dataset.state === "open" || box.dataset.state === "answered") {
      box.dataset.state = how;
      for (const c of box.querySelectorAll("input, select, textarea, button")) c.disabled = true;
    }
  }
  chat.interrupts = [];
  chat.answers = new Map();
  lockComposer();
}

// reopenInterrupts lets the user answer again after the resume was refused.
function reopenInterrupts() {
  chat.answers = new Map();
  for (const box of ui.transcript.querySelectorAll(".interrupt[data-state=answered]")) {
    box.dataset.state = "open";
    for (const c of box.querySelectorAll("input, select, textarea, button")) c.disabled = false;
  }
  lockComposer();
}

// ---- settings and wiring ----

// session is the page's sign-in with the OpenID provider (oidc.js); null when Baton serves
// the page without one, and the token typed in the settings is sent instead.
let session = null;

// token returns the bearer token for Baton: the signed-in user's (renewed when it is about
// to expire), else the one typed in the settings.
async function token() {
  if (session) return session.token();
  return ui.token.value.trim();
}

// refusedSignIn reports whether e is Baton refusing the signed-in user's token.
function refusedSignIn(e) {
  return !!session && e instanceof HTTPError && e.status === 401;
}

// authed calls fn with the bearer token. When Baton refuses the signed-in user's token,
// the token is renewed (refreshed, or the user signs in again) and fn is called once more.
async function authed(fn) {
  try {
    return await fn(await token());
  } catch (e) {
    if (!refusedSignIn(e) || !(await session.refused())) throw e;
  }
  return fn(await token());
}

function autoSize() {
  ui.input.style.height = "auto";
  ui.input.style.height = Math.min(ui.input.scrollHeight, 200) + "px";
}

// leaveRun is what leaving a thread does to its run: the page closes its stream. A followed
// run is then only no longer followed; the page's own run is ended or kept as
// server.on_disconnect says (cancel: closing the request is an abort; detach: the run goes on
// and the thread list leads back to it). Stop, not leaving, is what always cancels.
function leaveRun() {
  const run = chat.run;
  if (!run) return;
  run.controller.abort();
}

function resetChat() {
  leaveRun();
  Object.assign(chat, newChat(), { runsEnded: chat.runsEnded });
  ui.transcript.replaceChildren();
  showUsage(null);
  welcome();
  setBusy(false);
  showThreadInURL(false);
  loadThreads();
}

// showThreadInURL puts the thread id in the URL, so that a reload comes back to it.
function showThreadInURL(replace) {
  const url = "#thread=" + encodeURIComponent(chat.threadId);
  if (location.hash === url) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
}

// openThread shows thread id as the coordinator keeps it: its messages, the form of each
// open interrupt, and its running run, followed live. A thread the coordinator does not
// know (a new chat that was never sent) starts empty under that id.
async function openThread(id) {
  leaveRun();
  Object.assign(chat, newChat(id), { runsEnded: chat.runsEnded });
  ui.transcript.replaceChildren();
  setBusy(false);
  setStatus("loading", "loading…");
  let doc = null;
  try {
    doc = await authed((tok) => getJSON(`${AGUI_URL}/threads/${encodeURIComponent(id)}`, { token: tok }));
  } catch (e) {
    if (chat.threadId !== id) return;
    if (!(e instanceof HTTPError && e.code === "THREAD_NOT_FOUND")) {
      notice("error", e instanceof HTTPError ? e.message : "Cannot reach the coordinator.", e instanceof HTTPError ? e.code : String((e && e.message) || e));
      if (e instanceof HTTPError && e.status === 401 && !session) $("#settings").open = true;
    }
  }
  if (chat.threadId !== id) return; // another thread was opened meanwhile
  showUsage(doc && doc.usage);
  const messages = doc && Array.isArray(doc.messages) ? doc.messages : [];
  if (!messages.length) welcome();
  restoreMessages(messages);
  setBusy(false);
  const left = takeLeftRun(id);
  if (doc && doc.run && typeof doc.run.runId === "string") {
    attach(doc.run.runId, left === doc.run.runId);
  } else {
    if (doc && Array.isArray(doc.interrupts) && doc.interrupts.length) {
      showInterrupts(doc.interrupts);
      setBusy(false);
    }
    if (doc && (left || unfinishedShown())) explainEnd(id, left);
  }
  markCurrentThread();
}

// LEFT_RUN is the sessionStorage key under which the page notes its own run when the page
// goes away while the run streams (a reload, closing the tab): closing that request ends
// the run under the default server.on_disconnect: cancel, and the page that comes back says so.
const LEFT_RUN = "baton.left-run";

window.addEventListener("pagehide", () => {
  const run = chat.run;
  if (!run || run.attached || !run.started || run.terminal) return;
  try {
    sessionStorage.setItem(LEFT_RUN, JSON.stringify({ threadId: chat.threadId, runId: run.runId }));
  } catch (_) {
    // storage full or disabled: the page then explains the end from the journal alone
  }
});

// takeLeftRun returns (and forgets) the run of thread id that this tab left running; "".
function takeLeftRun(id) {
  let v = null;
  try {
    v = JSON.parse(sessionStorage.getItem(LEFT_RUN) || "null");
    sessionStorage.removeItem(LEFT_RUN);
  } catch (_) {
    return "";
  }
  return v && v.threadId === id && typeof v.runId === "string" ? v.runId : "";
}

// unfinishedShown reports whether a restored tool call has no result.
function unfinishedShown() {
  for (const card of chat.tools.values()) if (card.dataset.state === "running") return true;
  return false;
}

// LEFT_WHY is what the page says about a run it left running and that was then cancelled.
const LEFT_WHY = "The page was reloaded or closed while Baton was working, and leaving the page cancels the run in progress.";

// explainEnd shows how the thread's last run ended when the thread is shown after it (a
// reload, another tab): the run's end from the thread's step journal, with the calls that
// got no result marked. leftRun is the run this tab left running ("" when none).
async function explainEnd(id, leftRun) {
  let end = null;
  try {
    for (let after = 0, pages = 0; pages < 20; pages++) {
      const body = await authed((tok) => getJSON(`${AGUI_URL}/threads/${encodeURIComponent(id)}/journal?after=${after}&limit=5000`, { token: tok }));
      const steps = Array.isArray(body.steps) ? body.steps : [];
      for (const s of steps) {
        if (s && s.kind === "run_end" && (!leftRun || s.runId === leftRun)) end = s;
      }
      if (steps.length < 5000) break;
      after = steps[steps.length - 1].seq;
    }
  } catch (_) {
    end = null; // the journal is a help: without it the page says less
  }
  if (chat.threadId !== id || chat.run) return; // the page moved on meanwhile
  const outcome = end ? end.outcome : "";
  let n = null;
  switch (outcome) {
    case "cancelled":
      n = notice("stopped", "Stopped. " + (leftRun ? LEFT_WHY : "The run was cancelled before it finished."));
      markUnfinished("stopped");
      break;
    case "error":
      n = notice("error", "The run ended with an error before it finished.");
      markUnfinished("failed");
      break;
    case "":
      if (leftRun || unfinishedShown()) {
        n = notice("stopped", leftRun ? "Stopped. " + LEFT_WHY : "This run ended before these calls had a result.");
        markUnfinished("stopped");
      }
      break;
    default:
      if (unfinishedShown()) markUnfinished("unfinished");
  }
  if (n) {
    n.dataset.outcome = outcome;
    if (leftRun) n.dataset.left = "true";
  }
}

// restoreMessages renders a thread's stored AG-UI messages: user and assistant text, tool
// calls with their tagged results. They become the history the next run sends.
function restoreMessages(messages) {
  for (const m of messages) {
    if (!m || typeof m !== "object" || typeof m.role !== "string") continue;
    switch (m.role) {
      case "user": {
        chat.messages.push(m);
        const bubble = append(el("div", "msg user"));
        bubble.dataset.messageId = m.id || "";
        bubble.appendChild(el("div", "msg-text", contentText(m.content)));
        break;
      }
      case "assistant": {
        const text = contentText(m.content);
        const msg = { ...m, content: text, toolCalls: [] };
        if (!Array.isArray(m.toolCalls) || !m.toolCalls.length) delete msg.toolCalls;
        chat.messages.push(msg);
        if (text) {
          const bubble = append(el("div", "msg assistant"));
          bubble.dataset.messageId = m.id || "";
          const node = bubble.appendChild(el("div", "msg-text", visibleText(text)));
          if (m.id) chat.texts.set(m.id, { node, msg, bubble });
        }
        chat.turn = msg;
        for (const tc of Array.isArray(m.toolCalls) ? m.toolCalls : []) {
          if (!tc || typeof tc.id !== "string" || !tc.function) continue;
          startTool(tc.id, String(tc.function.name || "tool"), msg.id);
          toolArgs(tc.id, typeof tc.function.arguments === "string" ? tc.function.arguments : "");
          toolEnd(tc.id);
        }
        chat.turn = null;
        break;
      }
      case "tool":
        toolResult({ messageId: m.id, toolCallId: m.toolCallId, content: m.content });
        break;
      case "activity":
        break;
      default:
        chat.messages.push(m); // system, developer, reasoning: history, not shown
    }
  }
}

// shownThreads is the thread list as last rendered (its JSON).
let shownThreads = "";

// loadThreads fills the thread list (GET agui/threads) for switching conversations.
async function loadThreads() {
  let list = [];
  try {
    const body = await authed((tok) => getJSON(`${AGUI_URL}/threads`, { token: tok }));
    list = Array.isArray(body.threads) ? body.threads : [];
  } catch (_) {
    return; // the list is a convenience: the chat works without it
  }
  // Unchanged lists are left in place, so that a link is not replaced under the pointer.
  const key = JSON.stringify(list);
  if (key === shownThreads && ui.threadList.childElementCount) {
    markCurrentThread();
    return;
  }
  shownThreads = key;
  const items = [];
  list = list.filter((t) => t && typeof t.threadId === "string" && THREAD_ID.test(t.threadId));
  const titles = threadTitles(list);
  for (const t of list) {
    const li = el("li");
    const a = li.appendChild(el("a", "thread-link"));
    a.appendChild(el("span", "thread-title", titles.get(t.threadId)));
    const when = shortTime(t.updatedAt);
    if (when) a.appendChild(el("span", "thread-time", when));
    a.href = "#thread=" + encodeURIComponent(t.threadId);
    a.dataset.threadId = t.threadId;
    a.title = t.threadId;
    const flags = [];
    if (t.running) flags.push("running");
    if (t.openInterrupts > 0) flags.push("waiting for you");
    if (flags.length) a.appendChild(el("span", "thread-flags", flags.join(", ")));
    items.push(li);
  }
  if (!items.length) items.push(el("li", "thread-empty", "No conversations yet."));
  ui.threadList.replaceChildren(...items);
  markCurrentThread();
}

// threadTitles names each chat of the list (newest first) for people: its title (the start
// of its first message, one line), or "Chat of <time>" without one; chats with the same
// name are numbered from the oldest, so that no two read alike.
function threadTitles(list) {
  const base = new Map();
  const count = new Map();
  for (const t of list) {
    let name = typeof t.title === "string" ? t.title.trim().split("\n")[0].trim() : "";
    if (name.length > 60) name = name.slice(0, 59).trimEnd() + "…";
    if (!name) name = "Chat of " + (shortTime(t.updatedAt) || "an unknown time");
    base.set(t.threadId, name);
    count.set(name, (count.get(name) || 0) + 1);
  }
  const seen = new Map();
  const out = new Map();
  for (let i = list.length - 1; i >= 0; i--) {
    const name = base.get(list[i].threadId);
    if (count.get(name) < 2) {
      out.set(list[i].threadId, name);
      continue;
    }
    const n = (seen.get(name) || 0) + 1;
    seen.set(name, n);
    out.set(list[i].threadId, `${name} (${n})`);
  }
  return out;
}

// shortTime is a timestamp as a short local date and time; "" when it is not one.
function shortTime(ts) {
  const d = typeof ts === "string" ? new Date(ts) : null;
  if (!d || Number.isNaN(d.getTime())) return "";
  return d.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

function markCurrentThread() {
  for (const a of ui.threadList.querySelectorAll("a[data-thread-id]")) {
    a.setAttribute("aria-current", a.dataset.threadId === chat.threadId ? "true" : "false");
  }
}

// suggestions are the example prompts of this deployment (from its agents and tools),
// served by the coordinator; fetched once.
let suggestions = null;

async function loadSuggestions() {
  if (suggestions) return suggestions;
  try {
    const res = await fetch("suggestions.json", { headers: { accept: "application/json" } });
    const body = res.ok ? await res.json() : {};
    suggestions = Array.isArray(body.suggestions) ? body.suggestions.filter((s) => typeof s === "string") : [];
  } catch {
    suggestions = [];
  }
  return suggestions;
}

function welcome() {
  const w = el("section", "welcome");
  w.appendChild(el("p", "", "Ask Baton something. It delegates to its sub-agents and tools and shows their work here."));
  const ex = w.appendChild(el("div", "examples"));
  ui.transcript.appendChild(w);
  loadSuggestions().then((list) => {
    for (const text of list) {
      const b = ex.appendChild(el("button", "example", text));
      b.type = "button";
      b.addEventListener("click", () => sendMessage(text));
    }
  });
}

ui.composer.addEventListener("submit", (e) => {
  e.preventDefault();
  sendMessage(ui.input.value);
});
ui.input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    sendMessage(ui.input.value);
  }
});
ui.input.addEventListener("input", autoSize);
ui.stop.addEventListener("click", stopRun);
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && chat.run) stopRun();
});
ui.newChat.addEventListener("click", resetChat);
window.addEventListener("hashchange", () => {
  const id = threadFromURL();
  if (id && id !== chat.threadId) openThread(id);
});
ui.threads.addEventListener("toggle", () => {
  if (ui.threads.open) loadThreads();
});
ui.threadList.addEventListener("click", (e) => {
  if (e.target.closest && e.target.closest("a[data-thread-id]")) ui.threads.open = false;
});
// A tool card the user opened or closed keeps that state when its result arrives.
ui.transcript.addEventListener("click", (e) => {
  const summary = e.target.closest && e.target.closest("details.tool > summary");
  if (summary) summary.parentElement._userToggled = true;
});
ui.token.value = sessionStorage.getItem("baton.token") || "";
ui.token.addEventListener("change", () => sessionStorage.setItem("baton.token", ui.token.value.trim()));

// signInFirst signs the user in when Baton serves the page with its OpenID provider
// (oidc.js); without one it does nothing. A sign-in that did not succeed is shown, with a
// button to try again; the page then works without a token (Baton refuses what needs one).
async function signInFirst() {
  const cfg = signInConfig();
  if (!cfg) return;
  setStatus("loading", "signing in…");
  let error = null;
  try {
    const r = await startSignIn(cfg);
    session = r.session;
    session.draft = () => ui.input.value;
    error = r.error || null;
    if (r.draft) {
      ui.input.value = r.draft;
      autoSize();
    }
  } catch (e) {
    error = e instanceof SignInError ? e : new SignInError("Signing in failed.", String((e && e.message) || e));
  }
  const panel = ui.token.closest(".panel");
  for (const c of panel.children) c.hidden = true;
  const who = panel.appendChild(el("p", "signed-in", session && session.signedIn ? "Signed in with " + new URL(cfg.issuer).host + "." : "Not signed in."));
  who.id = "signed-in";
  if (error) {
    const n = notice("error signin-error", error.message, error.detail);
    if (session) {
      const b = n.appendChild(el("button", "primary", "Sign in"));
      b.type = "button";
      b.addEventListener("click", () => session.signIn());
    }
  }
}

// showMCPConfig adds to the settings the configuration that lets an MCP client (an IDE, a
// desktop assistant) use this Baton over HTTP, when Baton serves MCP beside the page (it then
// puts a baton-mcp element in the page, naming the path). The URL is resolved against the
// page's own, so it holds behind a proxy that serves Baton under a path.
function showMCPConfig() {
  const meta = document.querySelector('meta[name="baton-mcp"]');
  if (!meta) return;
  const server = { type: "http", url: new URL(meta.content, location.href).href };
  const panel = ui.token.closest(".panel");
  const box = panel.appendChild(el("div", "mcp-client"));
  box.id = "mcp-client";
  box.appendChild(el("p", "", "Use Baton from an MCP client: add this to its mcpServers."));
  box.appendChild(el("pre", "", JSON.stringify({ mcpServers: { baton: server } }, null, 2)));
  box.appendChild(el("p", "hint", session
    ? "The client signs in with the same provider as this page."
    : 'If Baton asks for a bearer token, add "headers": {"Authorization": "Bearer <token>"}.'));
}

await signInFirst();
showMCPConfig();
{
  const id = threadFromURL();
  if (id) {
    openThread(id);
  } else {
    welcome();
    setBusy(false);
    showThreadInURL(true);
  }
  loadThreads();
}
