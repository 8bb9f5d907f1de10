// The JSON API, called with the bearer token the browser keeps for this tab.
// The token comes from the URL fragment (`#token=...`, which a browser never sends to a
// server) or from the sign-in form, and lives in sessionStorage only.

const KEY = "corral.token";

export class ApiError extends Error {
  constructor(status, body) {
    const detail = body && body.error ? `${body.error.code}: ${body.error.message}` : "";
    super(`HTTP ${status}${detail ? ` — ${detail}` : ""}`);
    this.status = status;
    this.body = body;
  }
}

/** Take a token from the fragment (`#token=T` or `#/route?token=T`), then drop it from the address. */
export function tokenFromFragment() {
  const [path, search = ""] = location.hash.replace(/^#/, "").split("?");
  const bare = path.startsWith("token=");
  const query = new URLSearchParams(bare ? path : search);
  const given = query.get("token");
  if (!given) return;
  setToken(given);
  query.delete("token");
  const route = bare || !path ? "/runs" : path;
  const rest = bare ? "" : query.toString();
  history.replaceState(null, "", `${location.pathname}${location.search}#${route}${rest ? `?${rest}` : ""}`);
}

export function token() {
  return sessionStorage.getItem(KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

function headers(extra = {}) {
  return { Authorization: `Bearer ${token() || ""}`, Accept: "application/json", ...extra };
}

/** A URL of the API: paths are absolute from the server's root, the page lives in /ui/. */
export function apiUrl(path, query = {}) {
  const url = new URL(path.replace(/^\//, ""), new URL("..", location.href));
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  }
  return url;
}

async function answer(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    if (response.status === 401) window.dispatchEvent(new Event("corral:unauthorized"));
    throw new ApiError(response.status, body);
  }
  return body;
}

/** GET a JSON resource. */
export async function get(path, query = {}) {
  return answer(await fetch(apiUrl(path, query), { headers: headers() }));
}

/** POST a JSON body. */
export async function post(path, body) {
  const init = {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  };
  return answer(await fetch(apiUrl(path), init));
}

/**
 * Follow a run's Server-Sent Events with fetch() and a reader (EventSource cannot send the
 * bearer header). `onEvent(name, data, id)` gets each message; resolves when the stream ends.
 */
export async function follow(path, query, onEvent, signal) {
  const response = await fetch(apiUrl(path, query), {
    headers: headers({ Accept: "text/event-stream" }),
    signal,
  });
  if (!response.ok) return answer(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer = (buffer + value).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const message = parseMessage(block);
      if (message) onEvent(message.event, message.data, message.id);
    }
  }
}

/** One SSE message (`event:`, `id:`, `data:` lines); comments and pings give null. */
export function parseMessage(block) {
  let event = "message";
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "id") id = value;
    else if (field === "data") data.push(value);
  }
  if (!data.length) return null;
  try {
    return { event, id, data: JSON.parse(data.join("\n")) };
  } catch {
    return null;
  }
}
