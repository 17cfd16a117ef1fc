// Notebook cells on the page: [n] counters, status colour, duration, outputs.
// Text from the server is set with textContent; the only markup inserted is the "html"
// of outputs and markdown, which the server has sanitised (render.py), and the page's CSP
// forbids inline scripts anyway.
"use strict";

const $ = (id) => document.getElementById(id);

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// How a finished cell ended: "ok", "failed", "interrupted", "timeout" or "died".
export function outcomeOf(execution) {
  const status = execution.status;
  if (!status) return "unknown";
  if (status === "error") {
    const ename = execution.error && execution.error.ename;
    return ename === "KeyboardInterrupt" ? "interrupted" : "failed";
  }
  return status === "ok" || status === "timeout" || status === "died" ? status : "failed";
}

function seconds(value) {
  if (typeof value !== "number") return "";
  return value < 10 ? value.toFixed(2) + " s" : value.toFixed(1) + " s";
}

// One line for the status bar, the error's summary first.
export function summaryOf(execution) {
  const prompt = typeof execution.execution_count === "number" ? "[" + execution.execution_count + "]" : "[ ]";
  const error = execution.error;
  const took = seconds(execution.duration_s);
  switch (outcomeOf(execution)) {
    case "ok": return "Cell " + prompt + " ran in " + took + ".";
    case "interrupted": return "Cell " + prompt + " was stopped (interrupted) after " + took + ".";
    case "timeout": return "Cell " + prompt + " timed out after " + took + ".";
    case "died": {
      const why = execution.ending && execution.ending.detail ? ": " + execution.ending.detail + "." : ";";
      return "Cell " + prompt + ": the kernel died" + why + " Its variables were lost.";
    }
    default: {
      const what = error ? error.ename + (error.evalue ? ": " + error.evalue : "") : "error";
      return "Cell " + prompt + " failed: " + what;
    }
  }
}

const LABELS = { ok: "ok", failed: "failed", interrupted: "stopped", timeout: "timed out", died: "kernel died",
  unknown: "" };

export function createCodeCell(source) {
  const cell = el("article", "cell code status-running");
  const head = el("div", "cell-head");
  head.append(el("span", "prompt", "[*]"), el("span", "cell-status", "running…"));
  const pre = el("pre", "source", source);
  cell.append(head, pre, el("div", "outputs"));
  return cell;
}

export function addOutputHtml(cell, html) {
  const box = el("div", "output");
  box.innerHTML = html; // sanitised by the server
  cell.querySelector(".outputs").appendChild(box);
}

export function finishCell(cell, execution) {
  const outcome = outcomeOf(execution);
  cell.classList.remove("status-running");
  cell.classList.add("status-" + outcome);
  if (execution.cell_id) cell.id = "cell-id=" + execution.cell_id; // what an answer's numbers link to
  const count = execution.execution_count;
  cell.querySelector(".prompt").textContent = typeof count === "number" ? "[" + count + "]" : "[ ]";
  const took = seconds(execution.duration_s);
  cell.querySelector(".cell-status").textContent = [LABELS[outcome], took].filter(Boolean).join(" · ");
}

export function createMarkdownCell(html, role) {
  const kind = role === "answer" ? "answer" : "markdown";
  const cell = el("article", "cell " + kind + (role ? " role-" + role : ""));
  const body = el("div", "outputs");
  body.innerHTML = html; // sanitised by the server
  cell.appendChild(body);
  return cell;
}

// The model's reply while it is written: plain text (never HTML) and a tool call's code.
export function createDraftCell() {
  const cell = el("article", "cell draft");
  cell.appendChild(el("div", "draft-text"));
  return cell;
}

export function appendDraft(cell, kind, text) {
  let part = cell.lastElementChild;
  const wanted = kind === "code" ? "PRE" : "DIV";
  if (!part || part.tagName !== wanted) {
    part = el(kind === "code" ? "pre" : "div", kind === "code" ? "draft-code" : "draft-text");
    cell.appendChild(part);
  }
  part.textContent += text;
}

// A cell from GET /sessions/{id}/cells (a reopened session).
export function cellFromView(view) {
  if (view.cell_type !== "code") {
    const role = view.role || (/^#+ Answer/.test(view.source) ? "answer" : null);
    return createMarkdownCell(view.html, role);
  }
  const cell = createCodeCell(view.source);
  cell.querySelector(".outputs").innerHTML = view.html; // sanitised by the server
  finishCell(cell, {
    status: view.status, execution_count: view.execution_count, cell_id: view.id,
    duration_s: view.duration_s, error: view.error,
  });
  if (view.undone) markUndone(cell);
  if (view.by === "person") markByHand(cell);
  return cell;
}

// A cell a person ran from JupyterLab or VS Code on the conversation's kernel.
function markByHand(cell) {
  cell.classList.add("by-person");
  const badge = el("span", "by-badge", "by hand");
  badge.title = "Run by a person from a Jupyter client (JupyterLab, VS Code) attached to this conversation";
  cell.querySelector(".cell-head").appendChild(badge);
}

// A cell whose effects an undo took back: it stays in the notebook, shown as undone.
function markUndone(cell) {
  cell.classList.add("undone");
  const badge = el("span", "undone-badge", "undone");
  badge.title = "Undone: the variables were put back as they were before this cell";
  cell.querySelector(".cell-head").appendChild(badge);
}

// Replace the notebook with these cells (one DOM insertion, so 200 cells render at once).
export function renderCells(views) {
  const fragment = document.createDocumentFragment();
  for (const view of views) fragment.appendChild(cellFromView(view));
  const container = $("cells");
  container.textContent = "";
  container.appendChild(fragment);
}

export function appendCell(cell) {
  $("cells").appendChild(cell);
  $("composer").scrollIntoView({ block: "end" });
}
