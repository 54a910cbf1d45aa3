// erobs_bt live view client: long-polls /api/state and redraws; buttons POST to /api/<action>.
// Everything shown is built with DOM calls and textContent (script labels are data, never HTML).
"use strict";

const STATUS_ICON = { RUNNING: "●", SUCCESS: "✓", FAILURE: "✗", INVALID: "·" };
const CONTROL_HEADER = { "X-Requested-By": "erobs-bt" };
const openChoice = new Map(); // details key -> open state the user chose
let version = 0;
let started = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, String(value));
    else node[key] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function statusIcon(status) {
  return el("span", { class: "status", title: status }, STATUS_ICON[status] || "?");
}

function seconds(map) {
  const parts = Object.entries(map || {}).map(([phase, s]) => `${phase} ${Number(s).toFixed(2)} s`);
  return parts.length ? parts.join(", ") : "";
}

// Keep what the user opened or closed across redraws; programmatic changes are not choices.
function remember(details, key, fallback) {
  details.open = openChoice.has(key) ? openChoice.get(key) : fallback;
  details.firstElementChild.addEventListener("click", () => openChoice.set(key, !details.open));
}

// A FAILURE under a parent that did not fail was handled (e.g. a cache miss in ReplayOrPlan).
function nodeItem(node, parentStatus) {
  const handled = node.status === "FAILURE" && parentStatus !== "FAILURE";
  const item = el(
    "li",
    { class: handled ? "node handled" : "node", "data-status": node.status, "data-name": node.name },
    statusIcon(node.status),
    el("span", { class: "name" }, node.name),
    node.type && node.type !== node.name.replace(/\?$/, "") ? el("span", { class: "type" }, node.type) : null,
    node.message ? el("span", { class: "message" }, node.message) : null,
  );
  if (node.children && node.children.length) {
    item.append(el("ul", {}, ...node.children.map((child) => nodeItem(child, node.status))));
  }
  return item;
}

function boundaryLine(boundary) {
  if (!boundary) return null;
  const waiting = boundary.status === "RUNNING";
  const text = waiting ? `${boundary.name}: ${boundary.message || "waiting"}` : boundary.name;
  return el("div", { class: "boundary", "data-status": boundary.status, "data-name": boundary.name },
    statusIcon(boundary.status), text);
}

function unitEntry(entry) {
  const key = `unit:${entry.unit}`;
  const summary = el(
    "summary", {},
    statusIcon(entry.status),
    el("span", { class: "name" }, entry.name),
    entry.cache ? el("span", { class: "cache", "data-cache": entry.cache }, entry.cache) : null,
    seconds(entry.seconds) ? el("span", { class: "timing" }, seconds(entry.seconds)) : null,
    entry.error ? el("span", { class: "message" }, entry.error) : null,
  );
  const details = el(
    "details",
    { class: "unit" + (entry.current ? " current" : ""), "data-unit": entry.unit, "data-status": entry.status },
    summary,
  );
  if (entry.children) details.append(el("ul", {}, ...entry.children.map((c) => nodeItem(c, entry.status))));
  remember(details, key, Boolean(entry.open));
  const wrapper = el("div", { class: "unit-block" }, boundaryLine(entry.boundary), details);
  return wrapper;
}

function foldEntry(entry) {
  const key = `fold:${entry.first}-${entry.last}`;
  const words = { done: "succeeded", pending: "pending", mixed: "" };
  const span = entry.first === entry.last ? `unit ${entry.first}` : `units ${entry.first}–${entry.last}`;
  const status = entry.state === "done" ? "SUCCESS" : entry.state === "pending" ? "INVALID" : "RUNNING";
  const details = el(
    "details",
    { class: `fold fold-${entry.state}`, "data-first": entry.first, "data-last": entry.last, "data-status": status },
    el("summary", {}, statusIcon(status), `${span} ${words[entry.state]} (${entry.units.length})`),
  );
  const fill = () => {
    if (details.open && details.children.length === 1) {
      details.append(el("ol", { start: entry.first }, ...entry.units.map((u) =>
        el("li", { "data-status": u.status },
          `${STATUS_ICON[u.status] || "?"} ${u.label}` + (u.cache ? ` [${u.cache}]` : "") +
          (u.seconds ? ` ${Number(u.seconds).toFixed(2)} s` : "")))));
    }
  };
  details.addEventListener("toggle", fill);
  remember(details, key, false);
  fill();
  return details;
}

function renderTree(tree) {
  const container = document.getElementById("tree");
  const counts = document.getElementById("counts");
  if (!tree) {
    counts.textContent = "";
    return;
  }
  const c = tree.counts;
  counts.textContent =
    `— ${tree.total_units} units: ${c.SUCCESS} done, ${c.RUNNING} running, ${c.FAILURE} failed, ${c.INVALID} pending`;
  const rootLine = el("div", { class: "node root", "data-status": tree.root.status },
    statusIcon(tree.root.status), el("span", { class: "name" }, tree.root.name));
  const parts = [rootLine];
  for (const entry of tree.entries) {
    if (entry.kind === "unit") parts.push(unitEntry(entry));
    else if (entry.kind === "fold") parts.push(foldEntry(entry));
    else parts.push(boundaryLine(entry));
  }
  container.replaceChildren(...parts);
}

function setText(id, text) {
  document.getElementById(id).textContent = text;
}

function renderStatus(s) {
  const stateEl = document.getElementById("state");
  stateEl.textContent = s.state;
  stateEl.dataset.state = s.state;
  setText("state-message", s.state_message || "");
  const goal = s.goal || {};
  if (goal.id) {
    started = goal.started || started;
    setText("goal", `${goal.id} · ${goal.mode || ""} · ${goal.total_steps ?? "?"} steps · ${goal.units ?? "?"} units` +
      (goal.eligible ? " · cache eligible" : ""));
  }
  const fb = s.feedback;
  const total = fb ? fb.total_steps : (s.result ? s.result.total_steps : 0);
  const done = s.result ? s.result.completed_steps
    : fb ? Math.round(fb.progress_percentage * fb.total_steps / 100) : 0;
  const pct = s.result && s.result.status === "SUCCEEDED" ? 100 : fb ? fb.progress_percentage : 0;
  document.getElementById("progress-bar").style.width = `${pct}%`;
  setText("progress-text", `${done} / ${total} steps (${Math.round(pct)} %)`);
  // The tree's current unit: the running one, or the one a paused boundary waits before.
  const tree = s.tree;
  const entry = tree ? tree.entries.find((e) => e.kind === "unit" && e.unit === tree.current_unit) : null;
  if (entry) {
    setText("current-unit", `unit ${entry.unit}/${tree.total_units}: ${entry.label}`);
  } else if (fb && fb.unit_index) {
    setText("current-unit", `unit ${fb.unit_index}/${tree ? tree.total_units : "?"}: ${fb.current_action}`);
  } else {
    setText("current-unit", "—");
  }
  const cache = document.getElementById("cache-status");
  cache.textContent = fb && fb.cache_status ? `cache ${fb.cache_status}` : "";
  cache.dataset.cache = fb ? fb.cache_status : "";
  setText("status-message", fb ? fb.status_message : "—");
  const result = document.getElementById("result");
  result.hidden = !s.result;
  if (s.result) {
    result.dataset.status = s.result.status;
    result.textContent = `${s.result.goal_id} ${s.result.status}: ${s.result.completed_steps} / ` +
      `${s.result.total_steps} steps` + (s.result.error_message ? ` — ${s.result.error_message}` : "");
  }
  const error = document.getElementById("last-error");
  error.hidden = !s.last_error;
  error.textContent = s.last_error ? `last error: ${s.last_error}` : "";
  const state = s.state;
  document.getElementById("pause").disabled = state !== "RUNNING";
  document.getElementById("resume").disabled = state !== "PAUSED";
  document.getElementById("cancel").disabled = !["RUNNING", "COMPLETING_TASK", "PAUSED"].includes(state);
}

function renderEvents(events) {
  const list = document.getElementById("events");
  const origin = started || (events.length ? events[0].t : 0);
  list.replaceChildren(...events.slice().reverse().map((e) => {
    const fields = Object.entries(e)
      .filter(([k, v]) => !["t", "event"].includes(k) && v !== "")
      .map(([k, v]) => `${k}=${v}`).join(" ");
    const isError = Boolean(e.error) || String(e.detail || "").startsWith("failed");
    return el("li", { class: isError ? "error" : "" }, `+${(e.t - origin).toFixed(3)} ${e.event} ${fields}`);
  }));
}

function render(s) {
  renderStatus(s);
  renderTree(s.tree);
  renderEvents(s.events || []);
  document.body.dataset.version = String(s.version);
}

async function poll() {
  const connection = document.getElementById("connection");
  for (;;) {
    try {
      const response = await fetch(`/api/state?after=${version}&wait=20`, { cache: "no-store" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const state = await response.json();
      connection.hidden = true;
      if (state.version !== version) {
        version = state.version;
        render(state);
      }
    } catch (err) {
      connection.hidden = false;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

async function control(action) {
  const reply = document.getElementById("reply");
  try {
    const response = await fetch(`/api/${action}`, { method: "POST", headers: CONTROL_HEADER });
    const body = await response.json();
    reply.textContent = body.message || body.error || "";
    reply.dataset.success = String(Boolean(body.success));
  } catch (err) {
    reply.textContent = `${action} failed: ${err}`;
  }
}

for (const action of ["pause", "resume", "cancel"]) {
  document.getElementById(action).addEventListener("click", () => control(action));
}
poll();
