// AG-UI 1.0 client helpers for the Baton chat page: the SSE framer, ids, tool-result tags,
// JSON Patch and the streaming POST. No DOM code lives here.

// SSEFramer turns the chunks of a text/event-stream body into the JSON of its `data:`
// fields. Frames end at a blank line; `event:`, `id:`, `retry:` and `: comment` lines are
// ignored; several `data:` lines of one frame are joined with "\n" (WHATWG SSE rules).
export class SSEFramer {
  constructor() {
    this.buf = "";
  }

  // push adds decoded text and returns the data strings of every frame it completed.
  push(text) {
    this.buf += text.replace(/\r\n?/g, "\n");
    const out = [];
    for (;;) {
      const end = this.buf.indexOf("\n\n");
      if (end < 0) break;
      const frame = this.buf.slice(0, end);
      this.buf = this.buf.slice(end + 2);
      const data = frameData(frame);
      if (data !== null) out.push(data);
    }
    return out;
  }

  // flush returns the data of a last frame that was not followed by a blank line.
  flush() {
    const rest = this.buf;
    this.buf = "";
    if (rest.trim() === "") return [];
    const data = frameData(rest);
    return data === null ? [] : [data];
  }
}

function frameData(frame) {
  const lines = [];
  for (const line of frame.split("\n")) {
    if (line.startsWith("data:")) {
      let v = line.slice(5);
      if (v.startsWith(" ")) v = v.slice(1);
      lines.push(v);
    }
  }
  return lines.length ? lines.join("\n") : null;
}

// uid returns a random id. crypto.randomUUID only exists in secure contexts, and the page
// may be served over plain http from a container host, so getRandomValues is used.
export function uid(prefix) {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return prefix + "-" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

// parseTag reads the tag on the first line of a tool result (DESIGN §5):
// "[INPUT_REQUIRED:task_id=t1]\n…" → {tag:"INPUT_REQUIRED", arg:"task_id=t1", body:"…"}.
// A result without a tag gives tag "".
export function parseTag(content) {
  const text = typeof content === "string" ? content : contentText(content);
  const m = /^\[([A-Z_]+)(?::([^\]]*))?\][ \n]?/.exec(text);
  if (!m) return { tag: "", arg: "", body: text };
  return { tag: m[1], arg: m[2] || "", body: text.slice(m[0].length) };
}

// RESULT_TAGS are the tags that start a tool result (DESIGN §5). They belong in the tool
// card; a model that repeats one in its answer has not said anything to the user by it.
const RESULT_TAGS = "COMPLETED|FAILED|REJECTED|CANCELED|INPUT_REQUIRED|AUTH_REQUIRED|TIMEOUT|UNREACHABLE|OK|ERROR|RETRY|ANSWERED|DECLINED";
const TAG_AT_LINE_START = new RegExp(`^[ \\t]*\\[(?:${RESULT_TAGS})(?::[^\\]\\n]*)?\\][ \\t]*`, "gm");
// A continued task's note, (continuation of task <id>: the agent asked …; the user
// answered …), is history for the model, not something to say to the user.
const CONTINUATION_NOTE = /^[ \t]*\(continuation of task [^\n]*\)[ \t]*$/gm;

// visibleText is the text of a model's answer as the user reads it: without result tags at
// the start of a line and without continuation notes. The history keeps the text as it came.
export function visibleText(text) {
  if (typeof text !== "string" || !text) return "";
  return text
    .replace(CONTINUATION_NOTE, "")
    .replace(TAG_AT_LINE_START, "")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

// contentText flattens AG-UI content (a string or ContentPart[]) to text.
export function contentText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return content == null ? "" : JSON.stringify(content);
  return content.map((p) => (p && p.type === "text" ? p.text : `[${p && p.type}]`)).join("");
}

// tagClass says how a tag is shown: ok, wait, retry or bad.
export function tagClass(tag) {
  switch (tag) {
    case "COMPLETED":
    case "OK":
    case "ANSWERED":
      return "ok";
    case "INPUT_REQUIRED":
    case "AUTH_REQUIRED":
      return "wait";
    case "RETRY":
      return "retry";
    case "":
      return "plain";
    default:
      return "bad";
  }
}

// applyPatch applies an RFC 6902 JSON Patch (add, remove, replace, move, copy, test) to a
// copy of doc and returns the copy. A failing operation throws.
export function applyPatch(doc, patch) {
  let root = structuredClone(doc === undefined ? {} : doc);
  for (const op of patch || []) {
    const path = parsePointer(op.path);
    switch (op.op) {
      case "add":
        root = setAt(root, path, structuredClone(op.value), true);
        break;
      case "replace":
        getAt(root, path);
        root = setAt(root, path, structuredClone(op.value), false);
        break;
      case "remove":
        root = removeAt(root, path);
        break;
      case "move": {
        const from = parsePointer(op.from);
        const v = getAt(root, from);
        root = removeAt(root, from);
        root = setAt(root, path, v, true);
        break;
      }
      case "copy":
        root = setAt(root, path, structuredClone(getAt(root, parsePointer(op.from))), true);
        break;
      case "test":
        if (JSON.stringify(getAt(root, path)) !== JSON.stringify(op.value)) throw new Error("patch test failed at " + op.path);
        break;
      default:
        throw new Error("unknown patch op " + op.op);
    }
  }
  return root;
}

function parsePointer(p) {
  if (p === "" || p === undefined) return [];
  if (!p.startsWith("/")) throw new Error("bad JSON pointer " + p);
  return p.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function getAt(root, path) {
  let cur = root;
  for (const k of path) {
    if (cur === null || typeof cur !== "object" || !(k in cur)) throw new Error("no value at /" + path.join("/"));
    cur = cur[k];
  }
  return cur;
}

function setAt(root, path, value, insert) {
  if (path.length === 0) return value;
  const parent = getAt(root, path.slice(0, -1));
  const k = path[path.length - 1];
  if (Array.isArray(parent)) {
    const i = k === "-" ? parent.length : Number(k);
    if (!Number.isInteger(i) || i < 0 || i > parent.length) throw new Error("bad array index " + k);
    if (insert) parent.splice(i, 0, value);
    else parent[i] = value;
  } else if (parent !== null && typeof parent === "object") {
    parent[k] = value;
  } else {
    throw new Error("cannot set below a scalar");
  }
  return root;
}

function removeAt(root, path) {
  if (path.length === 0) return undefined;
  const parent = getAt(root, path.slice(0, -1));
  const k = path[path.length - 1];
  getAt(root, path);
  if (Array.isArray(parent)) parent.splice(Number(k), 1);
  else delete parent[k];
  return root;
}

// HTTPError is a refusal of the run before its stream started (DESIGN §3: 4xx/5xx with a
// JSON body {error, message}).
export class HTTPError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// streamRun POSTs input to url and calls onEvent for every event of the SSE response. It
// resolves when the stream ends and rejects with HTTPError when the run is refused, or with
// an AbortError when signal aborts.
export async function streamRun(url, input, { signal, token, onEvent }) {
  const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
  if (token) headers.Authorization = "Bearer " + token;
  const resp = await fetch(url, { method: "POST", headers, body: JSON.stringify(input), signal });
  await readStream(resp, onEvent);
}

// followRun GETs a run's event stream (DESIGN §3 reconnect: replay after `after`, then the
// live run until its terminal event) and calls onEvent for every event, like streamRun.
export async function followRun(url, { signal, token, onEvent }) {
  const headers = { Accept: "text/event-stream" };
  if (token) headers.Authorization = "Bearer " + token;
  const resp = await fetch(url, { method: "GET", headers, signal });
  await readStream(resp, onEvent);
}

// getJSON GETs a JSON document; a refusal rejects with HTTPError.
export async function getJSON(url, { signal, token } = {}) {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  const resp = await fetch(url, { headers, signal });
  if (!resp.ok) throw await httpError(resp);
  return resp.json();
}

async function httpError(resp) {
  let code = "HTTP_" + resp.status;
  let message = resp.statusText || "The request was refused.";
  try {
    const body = await resp.json();
    if (body && body.error) code = body.error;
    if (body && body.message) message = body.message;
  } catch (_) {
    // not JSON: keep the status line
  }
  return new HTTPError(resp.status, code, message);
}

async function readStream(resp, onEvent) {
  if (!resp.ok) throw await httpError(resp);
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  const framer = new SSEFramer();
  const deliver = (datas) => {
    for (const d of datas) {
      let ev;
      try {
        ev = JSON.parse(d);
      } catch (_) {
        onEvent({ type: "RUN_ERROR", code: "BAD_FRAME", message: "The coordinator sent a frame that is not JSON." });
        continue;
      }
      onEvent(ev);
    }
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    deliver(framer.push(decoder.decode(value, { stream: true })));
  }
  deliver(framer.push(decoder.decode()));
  deliver(framer.flush());
}
