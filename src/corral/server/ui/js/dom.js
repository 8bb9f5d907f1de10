// Building the page from data safely: text goes in as text nodes, never as HTML. Run text
// (messages, tool results, replies) can be hostile, so no data ever reaches innerHTML.

/**
 * An element: `h("a", {href: "#/x", class: "c"}, "text", child)`. Strings and numbers become
 * text nodes; `on*` attributes are event listeners; `data` sets the dataset.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "data") {
      Object.assign(el.dataset, value);
    } else if (name === "href" && !String(value).startsWith("#")) {
      throw new Error("the dashboard only links inside itself");
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace the children of `el` with `children`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Any value as readable text: JSON for objects, as it is for strings. */
export function show(value) {
  if (value === undefined || value === null) return "—";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

/** A `<pre>` holding `value` as text. */
export function pre(value) {
  return h("pre", { class: "json" }, show(value));
}

/** A definition list from `[label, value]` pairs (values as text or nodes). */
export function facts(pairs, inline = false) {
  return h(
    "dl",
    { class: inline ? "facts inline" : "facts" },
    pairs.map(([label, value]) => [h("dt", {}, label), h("dd", {}, value instanceof Node ? value : show(value))]),
  );
}

/** A local time for an ISO timestamp (the raw text when it does not parse). */
export function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso ?? "—") : d.toLocaleString();
}

/** A duration in ms as `850 ms`, `3.2 s`, `4 min 10 s` or `2 h 5 min`. */
export function duration(ms) {
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(2) : Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

/** A status badge, its class from the status (a closed set, not data). */
export function badge(status, label) {
  const known = /^[a-z_]+$/.test(String(status)) ? String(status) : "other";
  return h("span", { class: `badge s-${known}` }, label);
}
