// Forms generated from an interrupt's responseSchema (JSON Schema): strings (with formats),
// enums (enum, enum + enumNames, oneOf/anyOf of const), numbers, integers, booleans,
// multi-select arrays of enums and nested objects, with defaults and required fields.
//
// buildFields(schema) describes the form as plain data; renderFields draws it; readPayload
// reads the drawn form back into a payload that matches the schema. Keeping the
// description separate from the DOM lets the page test the schema logic in isolation.

// isElicitation reports whether schema has the MCP elicitation shape
// {action: enum[accept, decline, …], content: object}: the page then shows Accept and
// Decline buttons instead of an "action" field.
export function isElicitation(schema) {
  const p = schema && schema.properties;
  if (!p || !p.action || !Array.isArray(p.action.enum)) return false;
  return p.action.enum.includes("accept") && (!p.content || isObject(p.content));
}

function isObject(s) {
  return s && (s.type === "object" || (!s.type && s.properties));
}

// enumOptions returns [{value, label}] for an enumerated schema, or null.
export function enumOptions(s) {
  if (!s) return null;
  if (Array.isArray(s.enum)) {
    const names = Array.isArray(s.enumNames) ? s.enumNames : [];
    return s.enum.map((v, i) => ({ value: v, label: names[i] !== undefined ? String(names[i]) : String(v) }));
  }
  const alts = s.oneOf || s.anyOf;
  if (Array.isArray(alts) && alts.length && alts.every((a) => a && "const" in a)) {
    return alts.map((a) => ({ value: a.const, label: a.title !== undefined ? String(a.title) : String(a.const) }));
  }
  return null;
}

// buildFields describes the fields of an object schema. Each field:
// {name, path, kind, label, help, required, default, options?, min?, max?, step?,
//  minLength?, maxLength?, pattern?, inputType?, fields? (kind "object")}.
// kind is one of text, textarea, select, multiselect, number, integer, boolean, object, json.
export function buildFields(schema, prefix = []) {
  if (!isObject(schema)) {
    return [field("value", prefix.concat("value"), schema || {}, true)];
  }
  const req = new Set(Array.isArray(schema.required) ? schema.required : []);
  const props = schema.properties || {};
  // Required fields come first (in schema order), then the optional ones: schemas built
  // from maps arrive in an arbitrary order, and what must be answered belongs on top.
  const names = Object.keys(props);
  const ordered = names.filter((n) => req.has(n)).concat(names.filter((n) => !req.has(n)));
  return ordered.map((name) => field(name, prefix.concat(name), props[name] || {}, req.has(name)));
}

function field(name, path, s, required) {
  const f = {
    name,
    path,
    // A bare {text} answer (A2A input-required, ask_user) reads better as "Your answer".
    label: s.title || (name === "text" ? "Your answer" : humanize(name)),
    help: s.description || "",
    required,
    default: s.default,
  };
  const opts = enumOptions(s);
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== "null") : s.type;
  if (opts) {
    f.kind = "select";
    f.options = opts;
  } else if (type === "array" && s.items && enumOptions(s.items)) {
    f.kind = "multiselect";
    f.options = enumOptions(s.items);
    f.minItems = s.minItems;
    f.maxItems = s.maxItems;
  } else if (type === "boolean") {
    f.kind = "boolean";
  } else if (type === "integer" || type === "number") {
    f.kind = type;
    f.min = s.minimum;
    f.max = s.maximum;
    f.step = type === "integer" ? 1 : "any";
  } else if (type === "object" || (!type && s.properties)) {
    f.kind = "object";
    f.fields = buildFields(s, path);
  } else if (type === "string" || (!type && (s.format || s.minLength !== undefined || s.maxLength !== undefined))) {
    f.minLength = s.minLength;
    f.maxLength = s.maxLength;
    f.pattern = s.pattern;
    f.inputType = { email: "email", uri: "url", url: "url", date: "date", "date-time": "datetime-local" }[s.format] || "text";
    f.kind = f.inputType === "text" && (name === "text" || (s.maxLength || 0) > 200) ? "textarea" : "text";
  } else {
    f.kind = "json"; // anything else is edited as JSON
  }
  return f;
}

function humanize(name) {
  const s = String(name).replace(/[_-]+/g, " ").replace(/([a-z])([A-Z])/g, "$1 $2").trim();
  return s ? s[0].toUpperCase() + s.slice(1) : "Value";
}

// renderFields draws fields into container (a form or fieldset).
export function renderFields(doc, container, fields) {
  for (const f of fields) {
    const id = "f-" + f.path.join("-") + "-" + Math.random().toString(36).slice(2, 8);
    const wrap = doc.createElement("div");
    wrap.className = "field field-" + f.kind;
    wrap.dataset.path = f.path.join(".");
    wrap.dataset.kind = f.kind;
    const label = doc.createElement(f.kind === "object" || f.kind === "multiselect" ? "legend" : "label");
    label.textContent = f.label + (f.required ? " *" : "");
    if (f.kind !== "object" && f.kind !== "multiselect") label.htmlFor = id;
    let input;
    switch (f.kind) {
      case "select": {
        input = doc.createElement("select");
        if (!f.required || f.default === undefined) {
          const empty = doc.createElement("option");
          empty.value = "";
          empty.textContent = f.required ? "Choose…" : "(none)";
          input.appendChild(empty);
        }
        f.options.forEach((o, i) => {
          const opt = doc.createElement("option");
          opt.value = String(i);
          opt.textContent = o.label;
          if (f.default !== undefined && o.value === f.default) opt.selected = true;
          input.appendChild(opt);
        });
        break;
      }
      case "multiselect": {
        input = doc.createElement("fieldset");
        input.className = "choices";
        const defaults = Array.isArray(f.default) ? f.default : [];
        f.options.forEach((o, i) => {
          const l = doc.createElement("label");
          const cb = doc.createElement("input");
          cb.type = "checkbox";
          cb.value = String(i);
          cb.checked = defaults.includes(o.value);
          l.append(cb, " " + o.label);
          input.appendChild(l);
        });
        break;
      }
      case "boolean":
        input = doc.createElement("input");
        input.type = "checkbox";
        input.checked = f.default === true;
        break;
      case "number":
      case "integer":
        input = doc.createElement("input");
        input.type = "number";
        input.step = String(f.step);
        if (f.min !== undefined) input.min = String(f.min);
        if (f.max !== undefined) input.max = String(f.max);
        if (f.default !== undefined) input.value = String(f.default);
        break;
      case "object": {
        input = doc.createElement("fieldset");
        input.className = "nested";
        renderFields(doc, input, f.fields);
        break;
      }
      case "json":
        input = doc.createElement("textarea");
        input.rows = 3;
        input.placeholder = "JSON value";
        if (f.default !== undefined) input.value = JSON.stringify(f.default);
        break;
      default:
        input = doc.createElement(f.kind === "textarea" ? "textarea" : "input");
        if (f.kind === "textarea") input.rows = 2;
        else input.type = f.inputType;
        if (f.minLength !== undefined) input.minLength = f.minLength;
        if (f.maxLength !== undefined) input.maxLength = f.maxLength;
        if (f.default !== undefined) input.value = String(f.default);
    }
    input.id = id;
    input.name = f.path.join(".");
    if (f.required && !["boolean", "object", "multiselect"].includes(f.kind)) input.required = true;
    if (f.kind === "boolean") {
      wrap.append(input, label);
    } else if (f.kind === "object" || f.kind === "multiselect") {
      input.prepend(label);
      wrap.append(input);
    } else {
      wrap.append(label, input);
    }
    if (f.help) {
      const help = doc.createElement("small");
      help.className = "help";
      help.textContent = f.help;
      wrap.append(help);
    }
    container.appendChild(wrap);
  }
}

// FormError names the field whose value is unusable.
export class FormError extends Error {
  constructor(fieldLabel, message) {
    super(fieldLabel + ": " + message);
    this.field = fieldLabel;
  }
}

// readPayload reads the values of fields drawn by renderFields inside container, and returns
// an object that matches the schema they came from. Empty optional fields are left out.
export function readPayload(container, fields) {
  const out = {};
  for (const f of fields) {
    const path = f.path.join(".");
    const wrap = [...container.children].find((el) => el.classList.contains("field") && el.dataset.path === path);
    if (!wrap) throw new FormError(f.label, "missing from the form");
    const v = readValue(wrap, f);
    if (v !== undefined) out[f.name] = v;
  }
  return out;
}

// readValue coerces one field's input into its schema type.
export function readValue(wrap, f) {
  switch (f.kind) {
    case "boolean":
      return wrap.querySelector("input").checked;
    case "select": {
      const raw = wrap.querySelector("select").value;
      if (raw === "") {
        if (f.required) throw new FormError(f.label, "choose a value");
        return undefined;
      }
      return f.options[Number(raw)].value;
    }
    case "multiselect": {
      const vals = [...wrap.querySelectorAll("input[type=checkbox]")].filter((c) => c.checked).map((c) => f.options[Number(c.value)].value);
      if (f.minItems !== undefined && vals.length < f.minItems) throw new FormError(f.label, `choose at least ${f.minItems}`);
      if (f.maxItems !== undefined && vals.length > f.maxItems) throw new FormError(f.label, `choose at most ${f.maxItems}`);
      if (!vals.length && !f.required) return undefined;
      return vals;
    }
    case "number":
    case "integer": {
      const raw = wrap.querySelector("input").value.trim();
      if (raw === "") {
        if (f.required) throw new FormError(f.label, "a number is required");
        return undefined;
      }
      const n = Number(raw);
      if (!Number.isFinite(n)) throw new FormError(f.label, "not a number");
      if (f.kind === "integer" && !Number.isInteger(n)) throw new FormError(f.label, "must be a whole number");
      if (f.min !== undefined && n < f.min) throw new FormError(f.label, `must be at least ${f.min}`);
      if (f.max !== undefined && n > f.max) throw new FormError(f.label, `must be at most ${f.max}`);
      return n;
    }
    case "object": {
      const v = readPayload(wrap.querySelector(":scope > fieldset"), f.fields);
      if (!f.required && Object.keys(v).length === 0) return undefined;
      return v;
    }
    case "json": {
      const raw = wrap.querySelector("textarea").value.trim();
      if (raw === "") {
        if (f.required) throw new FormError(f.label, "a value is required");
        return undefined;
      }
      try {
        return JSON.parse(raw);
      } catch (_) {
        throw new FormError(f.label, "not valid JSON");
      }
    }
    default: {
      const el = wrap.querySelector("input, textarea");
      const raw = el.value;
      if (raw.trim() === "") {
        if (f.required) throw new FormError(f.label, "a value is required");
        return undefined;
      }
      if (f.minLength !== undefined && raw.length < f.minLength) throw new FormError(f.label, `at least ${f.minLength} characters`);
      if (f.maxLength !== undefined && raw.length > f.maxLength) throw new FormError(f.label, `at most ${f.maxLength} characters`);
      if (f.pattern && !matches(f.pattern, raw)) throw new FormError(f.label, "does not have the expected format");
      return raw;
    }
  }
}

// matches tests a JSON Schema pattern (unanchored, ECMA-262). A pattern the browser cannot
// compile is left to the coordinator, which validates every answer again.
function matches(pattern, s) {
  let re;
  try {
    re = new RegExp(pattern, "u");
  } catch (_) {
    return true;
  }
  return re.test(s);
}
