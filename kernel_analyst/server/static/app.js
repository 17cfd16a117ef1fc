// kernel-analyst web page: a notebook and a chat at once. Cells run in order with [n]
// counters; the input sits after the last result; Stop interrupts; sessions reopen from
// their audit notebook (after a reload too, from #session=ID).
"use strict";

import { ApiError, api, auth, download, getJson, jsonBody, readEvents, saveToken } from "./api.js";
import {
  addOutputHtml, appendCell, appendDraft, createCodeCell, createDraftCell, createMarkdownCell, finishCell,
  outcomeOf, renderCells, summaryOf,
} from "./cells.js";

const $ = (id) => document.getElementById(id);
const state = { info: null, session: null, busy: false, current: null, signedIn: false,
  runFirst: null, runLastMarkdown: null, outcome: null, shownCells: null };

function setStatus(text, kind) {
  const el = $("status");
  el.textContent = text;
  el.className = kind || "";
}

function sid() {
  return state.session ? state.session.id : null;
}

// -- token --------------------------------------------------------------------------------

async function checkToken(candidate, { quiet } = {}) {
  try {
    const res = await api("/sessions", {}, candidate);
    saveToken(candidate);
    state.signedIn = true;
    document.body.dataset.signedIn = "yes";
    renderSessions((await res.json()).sessions);
    if (!quiet) setStatus("Token accepted. Upload files, run code, or reopen a session.", "done");
    return true;
  } catch (err) {
    state.signedIn = false;
    document.body.dataset.signedIn = "no";
    clearSessions();
    if (err instanceof ApiError && err.status === 401) {
      saveToken("");
      setStatus("Token rejected: this server does not accept that token. Paste the one printed at "
        + "server start.", "error");
    } else {
      setStatus("Could not check the token: " + err.message, "error");
    }
    return false;
  } finally {
    refreshButtons();
  }
}

// -- sessions -------------------------------------------------------------------------------

function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  const ago = (Date.now() - date.getTime()) / 1000;
  if (ago < 60) return "just now";
  if (ago < 3600) return Math.round(ago / 60) + " min ago";
  if (ago < 86400) return Math.round(ago / 3600) + " h ago";
  return date.toLocaleDateString();
}

// A session that can take code: live, or dormant (its next use wakes it).
function usable(info) {
  return info.state === "open" || info.state === "dormant";
}

function sessionStatus(info) {
  if (info.state === "dormant") {
    return "dormant (" + [info.dormant_reason, when(info.dormant_since)].filter(Boolean).join(", ")
      + ") · wakes on use";
  }
  if (info.state === "closed") return "closed" + (info.closed_reason ? " (" + info.closed_reason + ")" : "");
  return info.busy ? "running" : "open";
}

function renderSessions(list) {
  const ul = $("sessions");
  ul.textContent = "";
  for (const info of list) {
    const li = document.createElement("li");
    li.className = "session " + info.state + (info.id === sid() ? " current" : "");
    li.dataset.id = info.id;
    const open = document.createElement("button");
    open.type = "button";
    open.className = "session-open";
    open.textContent = info.label || "untitled";
    open.title = "Reopen session " + info.id;
    open.addEventListener("click", () => openSession(info.id));
    const meta = document.createElement("span");
    meta.className = "meta";
    const created = new Date(info.created_at).toLocaleString([], { dateStyle: "short", timeStyle: "short" });
    meta.textContent = "created " + created + " · used " + when(info.last_used_at) + " · " + sessionStatus(info);
    li.append(open, meta);
    ul.appendChild(li);
  }
  if (!list.length) ul.innerHTML = '<li class="hint">No sessions yet.</li>';
}

function clearSessions() {
  $("sessions").innerHTML = '<li class="hint">Sign in with your token to see your sessions.</li>';
}

async function loadSessions() {
  if (!state.signedIn) return null;
  try { return (await getJson("/sessions")).sessions; } catch (err) { return null; /* shown elsewhere */ }
}

function applySessions(list) {
  renderSessions(list);
  const current = list.find((info) => info.id === sid());
  if (current && !state.busy) showSession(current); // dormant, or woken by a run
}

async function refreshSessions() {
  const list = await loadSessions();
  if (list) applySessions(list);
}

// One state change, one update: what it changes is fetched first, then the files, the
// variables, the sessions, the status line and the buttons are rendered in one synchronous
// step (one paint), so no status announces what the page does not show yet. ``apply``
// (the status line, the end of a run) runs in that step.
async function settle(apply) {
  const id = sid();
  const [files, variables] = await Promise.all([loadFiles(id), loadVariables(id, state.session)]);
  const sessions = await loadSessions(); // after the variables, whose listing holds the session a moment
  if (id && sid() === id) {
    if (files) renderFiles(id, files);
    if (variables) renderVariables(variables);
  }
  if (apply) apply();
  if (sessions) applySessions(sessions);
  refreshButtons();
}

function showSession(info) {
  state.session = info;
  document.body.dataset.session = info.id;
  history.replaceState(null, "", "#session=" + info.id);
  const label = info.label ? info.label + " · " : "";
  $("session-name").textContent = label + info.id + " · " + sessionStatus(info);
  $("session-name").className = info.state === "closed" ? "closed" : info.state;
  for (const li of $("sessions").children) li.classList.toggle("current", li.dataset.id === info.id);
}

async function openSession(id) {
  if (state.busy) return;
  try {
    // Marks for benchmarks/web_page.py (cheap; visible in the browser's performance panel).
    performance.mark("ka-cells-requested");
    const [data, files] = await Promise.all([getJson("/sessions/" + id + "/cells"), loadFiles(id)]);
    performance.mark("ka-cells-fetched");
    showSession(data.session);
    if (files) renderFiles(id, files); else $("files").textContent = "";
    clearVariables();
    renderCells(data.cells);
    state.shownCells = data.cells.length;
    performance.mark("ka-cells-rendered");
    requestAnimationFrame(() => setTimeout(() => performance.mark("ka-cells-painted")));
    $("progress").hidden = true;
    $("notebook-frame").hidden = true;
    const closed = data.session.state === "closed";
    if (data.session.state === "dormant") {
      setStatus("Reopened: " + data.cells.length + " cells. This session is dormant ("
        + (data.session.dormant_reason || "idle") + "): its kernel was let go of, its files, notebook and "
        + "variables are kept. Run code, ask or run an EDA to wake it.", "dormant");
    } else setStatus(closed ? "This session was closed (" + (data.session.closed_reason || "closed") + "): its notebook "
      + "is shown read-only. Start a new session to go on." : "Reopened: " + data.cells.length + " cells.",
      closed ? "stopped" : "done");
    refreshButtons(); // a closed session is read-only from the moment it is shown
    if (!closed) await refreshVariables(); // the status did not announce them: they follow
  } catch (err) {
    setStatus("Could not open session " + id + ": " + err.message, "error");
  }
  refreshButtons();
}

async function ensureSession(label) {
  if (state.session && usable(state.session)) return state.session.id;
  const res = await api("/sessions", jsonBody({ label: label.slice(0, 80) }));
  showSession(await res.json());
  $("cells").textContent = "";
  $("files").textContent = "";
  clearVariables();
  refreshSessions();
  refreshButtons();
  return state.session.id;
}

function newSession() {
  state.session = null;
  delete document.body.dataset.session;
  history.replaceState(null, "", location.pathname);
  for (const id of ["cells", "files"]) $(id).textContent = "";
  clearVariables();
  $("progress").hidden = true;
  $("notebook-frame").hidden = true;
  $("session-name").textContent = "New session: it starts with your first file or cell.";
  $("session-name").className = "hint";
  setStatus("New session: upload files or run some code.");
  refreshSessions();
  refreshButtons();
}

// -- files and variables ----------------------------------------------------------------------

async function uploadFiles(fileList) {
  const files = Array.from(fileList);
  if (!files.length) return;
  if (!state.signedIn) { setStatus("Paste your token first.", "error"); return; }
  let outcome;
  try {
    const id = await ensureSession(files.map((f) => f.name).join(", "));
    for (const [i, file] of files.entries()) {
      setStatus("Uploading " + file.name + " (" + (i + 1) + " of " + files.length + ")…", "running");
      const form = new FormData();
      form.append("file", file, file.name);
      await api("/sessions/" + id + "/files", { method: "POST", body: form });
    }
    outcome = ["Uploaded " + files.map((f) => f.name).join(", ") + ".", "done"];
  } catch (err) {
    outcome = ["Upload failed: " + err.message, "error"];
  }
  await settle(() => setStatus(...outcome)); // "Uploaded" with the file list that shows it
}

async function loadFiles(id) {
  if (!id) return null;
  try { return (await getJson("/sessions/" + id + "/files")).files; } catch (err) { return null; }
}

async function refreshFiles() {
  const id = sid();
  const files = await loadFiles(id);
  if (files && sid() === id) renderFiles(id, files);
}

function renderFiles(id, files) {
  const ul = $("files");
  ul.textContent = "";
  for (const file of files) {
    const li = document.createElement("li");
    const link = document.createElement("a");
    link.href = "#";
    link.className = "download";
    link.textContent = file.name;
    link.title = "Download " + file.name;
    link.addEventListener("click", (e) => {
      e.preventDefault();
      download("/sessions/" + id + "/files/" + file.name.split("/").map(encodeURIComponent).join("/"),
        file.name.split("/").pop()).catch((err) => setStatus("Download failed: " + err.message, "error"));
    });
    const size = document.createElement("span");
    size.className = "meta";
    size.textContent = file.size.toLocaleString() + " B";
    const eda = document.createElement("button");
    eda.type = "button";
    eda.className = "small eda";
    eda.textContent = "EDA";
    eda.title = "Run the EDA playbook on " + file.name;
    eda.disabled = state.busy || !state.session || !usable(state.session);
    eda.addEventListener("click", () => runEda(file.name));
    li.append(link, size, eda);
    ul.appendChild(li);
  }
}

function clearVariables() {
  $("variables").tBodies[0].textContent = "";
  $("no-variables").hidden = false;
}

async function loadVariables(id, info) {
  if (!id || !info || !usable(info)) return null; // a dormant one's are as its notebook recorded them
  try { return (await getJson("/sessions/" + id + "/variables")).variables; } catch (err) { return null; }
}

async function refreshVariables() {
  const id = sid();
  const variables = await loadVariables(id, state.session);
  if (variables && sid() === id) renderVariables(variables);
}

function renderVariables(variables) {
  const body = $("variables").tBodies[0];
  body.textContent = "";
  for (const v of variables) {
    const row = body.insertRow();
    row.insertCell().textContent = v.name;
    const type = row.insertCell();
    type.textContent = v.type.split(".").pop(); // the class name; the full one on hover
    type.title = v.type;
    row.insertCell().textContent = v.shape ? v.shape.join(" × ") : "";
  }
  $("no-variables").hidden = variables.length > 0;
}

// -- runs -------------------------------------------------------------------------------------

function showProgress(data) {
  const bar = $("progress");
  bar.hidden = false;
  bar.className = data.status === "running" ? "running" : data.status === "ok" ? "ok" : "failed";
  const what = data.status === "running" ? "" : data.status === "ok" ? " ✓" : " ✗ " + (data.error || data.status);
  bar.textContent = "Step " + data.index + " of " + data.total + ": " + data.title + what;
}

function finishProgress(done) {
  const bar = $("progress");
  if (bar.hidden) return;
  bar.className = done.status === "ok" ? "ok" : done.status === "stopped" ? "stopped" : "failed";
  bar.textContent += done.status === "stopped" ? " (stopped)" : "";
}

const STATUS_KIND = { ok: "done", failed: "error", interrupted: "stopped", timeout: "error", died: "error",
  stopped: "stopped" };

function removeDraft() {
  if (state.draft && state.draft.parentNode) state.draft.remove();
  state.draft = null;
}

function handleEvent(name, data) {
  if (name === "token") {
    // The model's reply as it is written; its cells replace it when the call ends.
    if (!state.draft || state.draftCall !== data.call) {
      removeDraft();
      state.draft = createDraftCell();
      state.draftCall = data.call;
      appendCell(state.draft);
    }
    appendDraft(state.draft, data.kind, data.text || "");
    return;
  }
  if (name === "model") { removeDraft(); return; }
  removeDraft();
  if (name === "cell") {
    state.current = createCodeCell(data.source || "");
    appendCell(state.current);
  } else if (name === "output") {
    if (!state.current) { state.current = createCodeCell(""); appendCell(state.current); }
    addOutputHtml(state.current, data.html || "");
  } else if (name === "result") {
    const ex = data.execution || data;
    if (state.current) finishCell(state.current, ex);
    state.current = null;
    state.outcome = [summaryOf(ex), STATUS_KIND[outcomeOf(ex)]]; // shown when the run has settled
  } else if (name === "markdown" || name === "answer") {
    const cell = createMarkdownCell(data.html || "", name === "answer" ? "answer" : null);
    state.runFirst = state.runFirst || cell;
    state.runLastMarkdown = cell;
    appendCell(cell);
  } else if (name === "resumed") {
    // A dormant session woke (or a lost kernel's variables came back) before this cell:
    // the notebook's marker, where the notebook has it.
    const marker = createMarkdownCell(data.html || "", "resumed");
    if (state.current && state.current.parentNode) state.current.before(marker);
    else appendCell(marker);
  } else if (name === "progress") {
    showProgress(data);
  } else if (name === "done") {
    finishProgress(data);
    if (data.summary_markdown) summaryFirst();
    state.outcome = [data.summary || "Done.", STATUS_KIND[data.status] || "done"];
  } else if (name === "error") {
    state.outcome = ["Failed: " + data.detail, "error"];
  }
}

// An EDA run's summary comes last (it is written once every step has run); the report
// reads findings first, as the saved notebook and HTML do: move it under the run's title.
function summaryFirst() {
  const first = state.runFirst;
  const summary = state.runLastMarkdown;
  if (first && summary && summary !== first && first.parentNode) {
    first.parentNode.insertBefore(summary, first.nextSibling);
  }
}

async function runStream(path, body, label) {
  state.shownCells = null; // built live from here: the next catch-up renders the notebook once
  state.runFirst = null;
  state.runLastMarkdown = null;
  state.outcome = null;
  state.busy = true;
  refreshButtons();
  setStatus(label + "…", "running");
  try {
    const res = await api(path + "?html=true", jsonBody(body));
    await readEvents(res, handleEvent);
  } catch (err) {
    state.outcome = [label + " failed: " + err.message, "error"];
  } finally {
    const outcome = state.outcome || [label + " ended.", "done"];
    // The end of a run is one update: the status, its files and variables, the buttons.
    await settle(() => {
      if (state.current) state.current.classList.remove("status-running");
      state.current = null;
      state.busy = false;
      setStatus(...outcome);
    });
  }
}

async function runCode(code) {
  const id = await ensureSession(code.split("\n")[0]);
  state.current = createCodeCell(code);
  appendCell(state.current);
  await runStream("/sessions/" + id + "/execute/stream", { code: code }, "Running");
}

async function askQuestion(question) {
  const id = await ensureSession(question);
  // No file list: the agent is told about every file in the session's working directory.
  await runStream("/sessions/" + id + "/ask", { question: question, files: [] }, "Answering");
}

async function runEda(file) {
  $("progress").hidden = true;
  await runStream("/sessions/" + sid() + "/eda", { file: file }, "EDA of " + file);
}

// Undo: the variables go back to before the last cell; the notebook is reloaded so the
// undone cells show as such (they stay, marked), with the server's note after them.
async function undo() {
  const id = sid();
  if (!id || state.busy) return;
  state.busy = true;
  refreshButtons();
  setStatus("Undoing the last cell…", "running");
  let show;
  try {
    const report = await (await api("/sessions/" + id + "/undo", jsonBody({}))).json();
    const cells = (await getJson("/sessions/" + id + "/cells")).cells;
    show = () => { renderCells(cells); state.shownCells = cells.length; setStatus(report.text, "done"); };
  } catch (err) {
    const nothing = err instanceof ApiError && err.status === 409;
    const why = err.detail || err.message;
    show = () => setStatus((nothing ? "Nothing to undo: " : "Undo failed: ") + why, nothing ? "stopped" : "error");
  }
  // One update: the cells, the variables they leave, the status and the buttons.
  await settle(() => { state.busy = false; show(); });
}

async function stop() {
  if (!sid()) return;
  setStatus("Stopping…", "running");
  try {
    await api("/sessions/" + sid() + "/interrupt", { method: "POST" });
  } catch (err) {
    setStatus("Could not stop: " + err.message, "error");
  }
}

async function submit() {
  const text = $("input").value;
  if (!text.trim() || state.busy) return;
  const mode = document.querySelector("input[name=mode]:checked").value;
  $("input").value = "";
  try {
    if (mode === "ask") await askQuestion(text.trim());
    else await runCode(text);
  } catch (err) {
    setStatus("Failed: " + err.message, "error");
    $("input").value = text;
  }
}

// -- buttons and wiring -------------------------------------------------------------------------

function refreshButtons() {
  const open = !state.session || usable(state.session);
  const ready = state.signedIn && open;
  const canAsk = Boolean(state.info && state.info.ask_available);
  document.body.dataset.busy = state.busy ? "yes" : "no"; // what tests wait for
  $("run").disabled = state.busy || !ready;
  $("stop").disabled = !state.busy;
  $("undo").disabled = state.busy || !ready || !sid();
  $("input").disabled = !ready;
  $("new-session").disabled = !state.signedIn || state.busy;
  $("file-input").disabled = !ready || state.busy;
  const askRadio = document.querySelector("input[name=mode][value=ask]");
  askRadio.disabled = !canAsk;
  $("ask-mode").title = canAsk ? "Ask the agent a question" : "Asking needs a model (serve --model ...)";
  if (!canAsk && askRadio.checked) document.querySelector("input[name=mode][value=code]").checked = true;
  for (const id of ["download-notebook", "download-html", "view-notebook"]) $(id).disabled = !sid();
  for (const button of $("files").querySelectorAll("button.eda")) button.disabled = state.busy || !ready;
  const mode = document.querySelector("input[name=mode]:checked").value;
  $("input").placeholder = mode === "ask" ? "A question about the data (Shift+Enter asks)"
    : "Python code (Shift+Enter runs)";
  $("run").textContent = mode === "ask" ? "Ask" : "Run";
}

async function viewNotebook() {
  try {
    const res = await api("/sessions/" + sid() + "/notebook.html");
    const frame = $("notebook-frame");
    frame.srcdoc = await res.text(); // a sandboxed frame: nothing in it can run
    frame.hidden = false;
  } catch (err) {
    setStatus("Could not load the notebook: " + err.message, "error");
  }
}

function wireDropzone() {
  const zone = $("dropzone");
  for (const ev of ["dragenter", "dragover"]) {
    zone.addEventListener(ev, (e) => { e.preventDefault(); zone.classList.add("over"); });
  }
  for (const ev of ["dragleave", "drop"]) {
    zone.addEventListener(ev, (e) => { e.preventDefault(); zone.classList.remove("over"); });
  }
  zone.addEventListener("drop", (e) => uploadFiles(e.dataTransfer.files));
  zone.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") $("file-input").click(); });
  $("file-input").addEventListener("change", (e) => { uploadFiles(e.target.files); e.target.value = ""; });
}

function wire() {
  $("token").value = auth.token;
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const candidate = $("token").value.trim();
    if (!candidate) { setStatus("Paste your token to start.", "error"); return; }
    setStatus("Checking the token…", "running");
    checkToken(candidate).then((ok) => { if (ok && !state.session) reopenFromHash(); });
  });
  wireDropzone();
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.shiftKey || e.ctrlKey || e.metaKey)) { e.preventDefault(); submit(); }
  });
  for (const radio of document.querySelectorAll("input[name=mode]")) radio.addEventListener("change", refreshButtons);
  $("stop").addEventListener("click", stop);
  $("undo").addEventListener("click", undo);
  $("new-session").addEventListener("click", newSession);
  $("download-notebook").addEventListener("click", () => download("/sessions/" + sid() + "/notebook",
    "kernel-analyst-" + sid() + ".ipynb").catch((err) => setStatus("Download failed: " + err.message, "error")));
  $("download-html").addEventListener("click", () => download("/sessions/" + sid() + "/notebook.html",
    "kernel-analyst-" + sid() + ".html").catch((err) => setStatus("Download failed: " + err.message, "error")));
  $("view-notebook").addEventListener("click", viewNotebook);
  $("cells").addEventListener("click", followCitation);
  document.addEventListener("visibilitychange", catchUp);
}

// A person may run cells on the same kernel from JupyterLab or VS Code (they are in the
// notebook, marked "by hand"): coming back to this tab shows the notebook as it is now.
async function catchUp() {
  const id = sid();
  if (!id || state.busy || document.visibilityState !== "visible") return;
  let data;
  try { data = await getJson("/sessions/" + id + "/cells"); } catch (err) { return; }
  if (sid() !== id || state.busy || data.cells.length === state.shownCells) return;
  renderCells(data.cells);
  state.shownCells = data.cells.length;
  document.body.dataset.caughtUp = String(data.cells.length); // what tests wait for
  await refreshVariables();
}

// A number of an answer links to the cell it came from ("#cell-id=ID"): scroll there and
// flash it, without touching the address (its "#session=" reopens the session on reload).
function followCitation(event) {
  const link = event.target.closest('a[href^="#cell-id="]');
  if (!link) return;
  event.preventDefault();
  const target = document.getElementById(link.getAttribute("href").slice(1));
  if (!target) return;
  target.scrollIntoView({ block: "center" });
  target.classList.remove("cited");
  void target.offsetWidth; // restart the flash when the same cell is cited twice
  target.classList.add("cited");
}

async function start() {
  wire();
  clearSessions();
  refreshButtons();
  try { state.info = await (await fetch("/api/info")).json(); } catch (err) { state.info = null; }
  if (state.info && state.info.auth === false) $("token-form").hidden = true;
  const token = state.info && state.info.auth === false ? "" : auth.token;
  if (token || (state.info && state.info.auth === false)) {
    const ok = await checkToken(token, { quiet: true });
    if (ok) setStatus("Ready. Upload files, run code, or reopen a session.");
    if (ok) await reopenFromHash();
  }
  refreshButtons();
}

// "#session=ID" reopens a session after a reload (ids are not secrets; the token is needed anyway).
async function reopenFromHash() {
  const match = /(?:^#|&)session=([0-9a-f]{16})(?:&|$)/.exec(location.hash);
  if (match) await openSession(match[1]);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
