// kernel-analyst web page: upload a CSV, run the EDA playbook or ask, watch cells stream in.
// Text from the server is set with textContent; the only markup inserted is the "html"
// field of events, which the server has already sanitised (and the page's CSP forbids
// inline scripts anyway). The token lives in sessionStorage and only ever travels in the
// Authorization header.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { token: sessionStorage.getItem("ka-token") || "", session: null, files: [], info: null, busy: false };

function setStatus(text, kind) {
  const el = $("status");
  el.textContent = text;
  el.className = kind || "";
}

async function api(path, options) {
  const opts = Object.assign({}, options || {});
  const headers = Object.assign({}, opts.headers || {});
  if (state.token) headers.Authorization = "Bearer " + state.token;
  opts.headers = headers;
  const res = await fetch(path, opts);
  if (!res.ok) {
    let detail = res.statusText;
    try { detail = (await res.json()).detail || detail; } catch (e) { /* not JSON */ }
    if (typeof detail !== "string") detail = JSON.stringify(detail);
    throw new Error(res.status + ": " + detail);
  }
  return res;
}

function jsonBody(data) {
  return { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(data) };
}

async function readEvents(res, onEvent) {
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

// -- rendering -------------------------------------------------------------------------------

let currentCell = null;

function addCell(kind, source) {
  const cell = document.createElement("article");
  cell.className = "cell " + kind;
  if (kind === "code") {
    const pre = document.createElement("pre");
    pre.className = "source";
    pre.textContent = source;
    cell.appendChild(pre);
  }
  const outputs = document.createElement("div");
  outputs.className = "outputs";
  cell.appendChild(outputs);
  $("cells").appendChild(cell);
  cell.scrollIntoView({ block: "end" });
  return cell;
}

function addHtml(cell, html) {
  const box = document.createElement("div");
  box.className = "output";
  box.innerHTML = html; // sanitised by the server (render.py)
  cell.querySelector(".outputs").appendChild(box);
}

function handleEvent(name, data) {
  if (name === "cell") {
    currentCell = addCell("code", data.source || "");
  } else if (name === "output") {
    if (!currentCell) currentCell = addCell("code", "");
    addHtml(currentCell, data.html || "");
  } else if (name === "result") {
    const ex = data.execution || data;
    if (currentCell) currentCell.classList.add("status-" + ex.status);
    currentCell = null;
  } else if (name === "markdown" || name === "answer") {
    const cell = addCell(name === "answer" ? "answer" : "markdown", "");
    addHtml(cell, data.html || "");
  } else if (name === "error") {
    setStatus("Error: " + data.detail, "error");
  } else if (name === "done") {
    setStatus(data.summary || "Done.", "done");
  }
}

// -- session and files -----------------------------------------------------------------------

async function ensureSession() {
  if (state.session) return state.session;
  const res = await api("/sessions", jsonBody({ label: "web" }));
  state.session = (await res.json()).id;
  document.body.dataset.session = state.session;
  history.replaceState(null, "", "#session=" + state.session);
  refreshButtons();
  return state.session;
}

async function upload(file) {
  if (!state.token) { setStatus("Paste your token first.", "error"); return; }
  try {
    const sid = await ensureSession();
    setStatus("Uploading " + file.name + "…");
    const form = new FormData();
    form.append("file", file, file.name);
    const res = await api("/sessions/" + sid + "/files", { method: "POST", body: form });
    const info = await res.json();
    state.files.push(info.name);
    const item = document.createElement("li");
    item.textContent = info.name + " — " + info.size.toLocaleString() + " bytes, sha256 " + info.sha256.slice(0, 12) + "…";
    $("files").appendChild(item);
    setStatus("Uploaded " + info.name + ". Run the EDA or ask a question.", "done");
  } catch (err) {
    setStatus("Upload failed: " + err.message, "error");
  }
  refreshButtons();
}

function refreshButtons() {
  const ready = Boolean(state.token && state.session);
  const hasFile = state.files.length > 0;
  const canAsk = Boolean(state.info && state.info.ask_available);
  $("run-eda").disabled = state.busy || !ready || !hasFile;
  $("question").disabled = !canAsk || !ready;
  $("ask").disabled = state.busy || !canAsk || !ready;
  $("run-code").disabled = state.busy || !state.token;
  for (const id of ["download-notebook", "download-html", "view-notebook", "new-session"]) {
    $(id).disabled = !state.session;
  }
  $("question").placeholder = canAsk ? "Ask a question about the data" : "Asking needs a model (serve --model ...)";
}

async function runStream(path, body, label) {
  state.busy = true;
  refreshButtons();
  setStatus(label + "…");
  try {
    const res = await api(path + "?html=true", jsonBody(body));
    await readEvents(res, handleEvent);
    if (!$("status").classList.contains("error") && !$("status").classList.contains("done")) {
      setStatus(label + " finished.", "done");
    }
  } catch (err) {
    setStatus(label + " failed: " + err.message, "error");
  } finally {
    state.busy = false;
    refreshButtons();
  }
}

async function download(path, filename) {
  try {
    const res = await api(path);
    const url = URL.createObjectURL(await res.blob());
    const a = document.createElement("a");
    a.href = url;
    a.download = filename;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    setStatus("Download failed: " + err.message, "error");
  }
}

async function viewNotebook() {
  try {
    const res = await api("/sessions/" + state.session + "/notebook.html");
    const frame = $("notebook-frame");
    frame.srcdoc = await res.text(); // a sandboxed frame: nothing in it can run
    frame.hidden = false;
  } catch (err) {
    setStatus("Could not load the notebook: " + err.message, "error");
  }
}

async function loadInfo() {
  try {
    state.info = await (await fetch("/api/info")).json();
  } catch (err) {
    state.info = null;
  }
  refreshButtons();
}

// -- wiring ----------------------------------------------------------------------------------

function wire() {
  $("token").value = state.token;
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    state.token = $("token").value.trim();
    sessionStorage.setItem("ka-token", state.token);
    setStatus(state.token ? "Token set. Drop a CSV file to begin." : "Paste your token to start.");
    refreshButtons();
  });
  const zone = $("dropzone");
  for (const ev of ["dragenter", "dragover"]) {
    zone.addEventListener(ev, (e) => { e.preventDefault(); zone.classList.add("over"); });
  }
  for (const ev of ["dragleave", "drop"]) {
    zone.addEventListener(ev, (e) => { e.preventDefault(); zone.classList.remove("over"); });
  }
  zone.addEventListener("drop", (e) => {
    for (const file of e.dataTransfer.files) upload(file);
  });
  zone.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") $("file-input").click(); });
  $("file-input").addEventListener("change", (e) => {
    for (const file of e.target.files) upload(file);
    e.target.value = "";
  });
  $("run-eda").addEventListener("click", () => {
    const file = state.files[state.files.length - 1];
    runStream("/sessions/" + state.session + "/eda", { file: file }, "EDA of " + file);
  });
  $("ask-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const question = $("question").value.trim();
    if (!question) return;
    runStream("/sessions/" + state.session + "/ask", { question: question, files: state.files }, "Answering");
  });
  $("code-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    await ensureSession();
    currentCell = addCell("code", $("code").value);
    runStream("/sessions/" + state.session + "/execute/stream", { code: $("code").value }, "Running");
  });
  $("download-notebook").addEventListener("click", () =>
    download("/sessions/" + state.session + "/notebook", "kernel-analyst-" + state.session + ".ipynb"));
  $("download-html").addEventListener("click", () =>
    download("/sessions/" + state.session + "/notebook.html", "kernel-analyst-" + state.session + ".html"));
  $("view-notebook").addEventListener("click", viewNotebook);
  $("new-session").addEventListener("click", () => {
    state.session = null;
    state.files = [];
    $("files").textContent = "";
    $("cells").textContent = "";
    $("notebook-frame").hidden = true;
    delete document.body.dataset.session;
    history.replaceState(null, "", location.pathname);
    setStatus("New session: drop a CSV file to begin.");
    refreshButtons();
  });
  if (state.token) setStatus("Token set. Drop a CSV file to begin.");
  // "#session=ID" reopens an existing session (ids are not secrets; the token is needed anyway).
  const match = /(?:^#|&)session=([0-9a-f]{16})(?:&|$)/.exec(location.hash);
  if (match) {
    state.session = match[1];
    document.body.dataset.session = state.session;
  }
  loadInfo();
}

document.addEventListener("DOMContentLoaded", wire);
