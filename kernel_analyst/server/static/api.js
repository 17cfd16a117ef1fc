// HTTP and server-sent events for the kernel-analyst page. The token lives in
// sessionStorage and only ever travels in the Authorization header (never in a URL).
"use strict";

const TOKEN_KEY = "ka-token";

export const auth = { token: sessionStorage.getItem(TOKEN_KEY) || "" };

export function saveToken(token) {
  auth.token = token;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
  constructor(status, detail) {
    super(status + ": " + detail);
    this.status = status;
    this.detail = detail;
  }
}

// fetch() with the token; a non-2xx answer becomes an ApiError carrying the server's detail.
export async function api(path, options, token) {
  const opts = Object.assign({}, options || {});
  const headers = Object.assign({}, opts.headers || {});
  const bearer = token === undefined ? auth.token : token;
  if (bearer) headers.Authorization = "Bearer " + bearer;
  opts.headers = headers;
  const res = await fetch(path, opts);
  if (!res.ok) {
    let detail = res.statusText;
    try { detail = (await res.json()).detail || detail; } catch (e) { /* not JSON */ }
    if (typeof detail !== "string") detail = JSON.stringify(detail);
    throw new ApiError(res.status, detail);
  }
  return res;
}

export async function getJson(path) {
  return (await api(path)).json();
}

export function jsonBody(data) {
  return { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(data) };
}

// Read an SSE response body, calling onEvent(name, data) for each event as it arrives.
export async function readEvents(res, onEvent) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      let data = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) onEvent(name, JSON.parse(data));
    }
  }
}

// Save a response body as a file (downloads need the Authorization header, so no plain links).
export async function download(path, filename) {
  const res = await api(path);
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
