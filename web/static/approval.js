// The approval card (DESIGN §9, design/approvals.md): a call that the coordinator will not
// send without the user's approval. It shows the tool, what it will do (the interrupt's
// message, already escaped by the coordinator and inserted here as text), the arguments as a
// form generated from the tool's input schema (responseSchema.properties.editedArgs) and
// filled with the model's arguments, and Approve / Deny with an optional reason. The answer
// is {approved: true, editedArgs?} (editedArgs only when the user changed something) or
// {approved: false, reason?}. An in-doubt question (metadata.baton.inDoubt: the call may
// already have run before a restart) gets the same card, worded as "run it again?".

import { buildFields, renderFields, readPayload, FormError } from "./forms.js";

// isApproval reports whether an interrupt is a tool-call approval.
export function isApproval(intr) {
  const s = intr && intr.responseSchema;
  return !!(intr && intr.reason === "tool_call" && s && s.properties && s.properties.approved);
}

// withArguments returns fields whose defaults are the model's arguments, so that the form
// shows what will be sent.
function withArguments(fields, args) {
  if (!args || typeof args !== "object") return fields;
  return fields.map((f) => {
    if (!(f.name in args)) return f;
    const v = args[f.name];
    if (f.kind === "object" && v && typeof v === "object") return { ...f, fields: withArguments(f.fields, v) };
    return { ...f, default: v };
  });
}

function sameJSON(a, b) {
  return JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
}

function sortKeys(v) {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === "object") {
    const out = {};
    for (const k of Object.keys(v).sort()) out[k] = sortKeys(v[k]);
    return out;
  }
  return v;
}

// approvalCard draws the card for intr; respond(entry) is called with the resume entry.
export function approvalCard(doc, intr, respond) {
  const el = (tag, className, text) => {
    const e = doc.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const meta = (intr.metadata && intr.metadata.baton && typeof intr.metadata.baton === "object") ? intr.metadata.baton : {};
  const inDoubt = meta.inDoubt === true;
  const args = meta.arguments && typeof meta.arguments === "object" ? meta.arguments : {};

  const box = el("section", "interrupt approval");
  box.dataset.interruptId = intr.id;
  box.dataset.reason = intr.reason;
  box.dataset.state = "open";
  if (inDoubt) box.dataset.inDoubt = "true";
  const head = box.appendChild(el("header"));
  head.appendChild(el("span", "who", "Baton"));
  head.appendChild(el("span", "role-tag", inDoubt ? "may already have run" : "asks for approval"));
  if (typeof meta.tool === "string") box.appendChild(el("p", "approval-tool", meta.tool));
  box.appendChild(el("p", "question", intr.message || "A call needs your approval."));
  if (intr.expiresAt) {
    const t = new Date(intr.expiresAt);
    if (!Number.isNaN(t.getTime())) box.appendChild(el("p", "expires", "Answer before " + t.toLocaleTimeString()));
  }

  const form = box.appendChild(el("form"));
  form.noValidate = true;
  const schema = intr.responseSchema.properties.editedArgs;
  const area = form.appendChild(el("fieldset", "fields arguments"));
  area.appendChild(el("legend", "", "Arguments (you can edit them)"));
  const fields = schema && typeof schema === "object" ? withArguments(buildFields(schema, ["editedArgs"]), args) : [];
  renderFields(doc, area, fields);
  const reasonWrap = form.appendChild(el("div", "field reason"));
  const reasonLabel = reasonWrap.appendChild(el("label", "", "Reason (optional, sent when you deny)"));
  const reason = reasonWrap.appendChild(el("input"));
  reason.type = "text";
  reason.name = "reason";
  reason.id = "reason-" + intr.id;
  reasonLabel.htmlFor = reason.id;
  const err = form.appendChild(el("p", "form-error"));
  err.hidden = true;

  const actions = form.appendChild(el("div", "actions"));
  const approve = actions.appendChild(el("button", "primary", inDoubt ? "Run it again" : "Approve"));
  approve.type = "submit";
  approve.dataset.action = "approve";
  const deny = actions.appendChild(el("button", "", inDoubt ? "Don't run it" : "Deny"));
  deny.type = "button";
  deny.dataset.action = "deny";

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    err.hidden = true;
    let values;
    try {
      values = fields.length ? readPayload(area, fields) : {};
    } catch (ex) {
      if (!(ex instanceof FormError)) throw ex;
      err.textContent = ex.message;
      err.hidden = false;
      return;
    }
    const payload = { approved: true };
    if (fields.length && !sameJSON(values, args)) payload.editedArgs = values;
    respond({ interruptId: intr.id, status: "resolved", payload });
  });
  deny.addEventListener("click", () => {
    const payload = { approved: false };
    const why = reason.value.trim();
    if (why) payload.reason = why;
    respond({ interruptId: intr.id, status: "resolved", payload });
  });
  return box;
}
