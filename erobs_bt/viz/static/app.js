// erobs_bt operator's console: follows /api/events (Server-Sent Events) and redraws;
// buttons POST to /api/<action> with the anti-CSRF header.
// Everything shown is built with DOM calls and textContent (script labels are data, never HTML).
//
// For other views on this page (the 3D cell view, static/cell3d.js, loaded when it exists):
// every stream event is re-dispatched on `document` as a CustomEvent whose `detail` is the
// parsed JSON — "erobs:state" (the picture), "erobs:trajectory" (one unit's planned motion),
// "erobs:joints" (the live arm state); shapes in erobs_bt/viz/web.py. `window.erobsConsole`
// holds the latest of each (`state`, `trajectories` by unit, `joints`).
"use strict";

const STATUS_ICON = { RUNNING: "●", SUCCESS: "✓", FAILURE: "✗", INVALID: "·" };
const CONTROL_HEADER = { "X-Requested-By": "erobs-bt" };
const openChoice = new Map(); // details key -> open state the user chose
const shared = { state: null, trajectories: new Map(), joints: null, cellView: null };
window.erobsConsole = shared;
let version = 0;
let replyTime = null; // [epoch s] when the shown control reply was given; dropped once the state changes later

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

function toolText(tool) {
  if (!tool) return "";
  return tool.state ? `${tool.gripper}: ${tool.state}` : tool.gripper;
}

function targetText(step) {
  const parts = [];
  if (step.joints) parts.push(`[${step.joints.deg.map((d) => d.toFixed(1)).join(", ")}]° = ` +
    `[${step.joints.rad.map((r) => r.toFixed(3)).join(", ")}] rad`);
  if (step.direction_vector) parts.push(`vector (${step.direction_vector.join(", ")})`);
  if (step.cartesian_target) parts.push(`target (${step.cartesian_target.join(", ")}) in ${step.frame_id}`);
  if (step.approach_joints) parts.push(`approach [${step.approach_joints.deg.map((d) => d.toFixed(1)).join(", ")}]°`);
  return parts.join("; ");
}

// The unit's steps, resolved; the executing one marked from the motion progress.
function stepsTable(entry, motion) {
  const here = motion && motion.unit === entry.unit ? motion.step : null;
  const rows = entry.steps.map((step) => {
    let phase = "";
    if (entry.status === "SUCCESS") phase = "done";
    else if (here !== null) phase = step.step < here ? "done" : step.step === here ? "current" : "";
    return el("tr", { class: phase, "data-step": step.step },
      el("td", { class: "num" }, String(step.step)),
      el("td", {}, el("div", {}, step.summary), el("div", { class: "detail" }, targetText(step))),
      el("td", { class: "muted" }, step.planning_type || ""),
      el("td", { class: "tool" }, toolText(step.tool)),
      el("td", { class: "muted path" }, step.path));
  });
  return el("table", { class: "steps" },
    el("thead", {}, el("tr", {}, el("th", {}, "step"), el("th", {}, "what (resolved)"),
      el("th", {}, "planning"), el("th", {}, "tool after"), el("th", {}, "from"))),
    el("tbody", {}, ...rows));
}

function unitEntry(entry, motion) {
  const key = `unit:${entry.unit}`;
  const summary = el(
    "summary", {},
    statusIcon(entry.status),
    el("span", { class: "name" }, entry.name),
    entry.cache ? el("span", { class: "cache", "data-cache": entry.cache }, entry.cache) : null,
    seconds(entry.seconds) ? el("span", { class: "timing" }, seconds(entry.seconds)) : null,
    entry.error ? el("span", { class: "message" }, entry.error) : null,
    entry.notice ? el("span", { class: "notice" }, entry.notice) : null,
  );
  const details = el(
    "details",
    { class: "unit" + (entry.current ? " current" : ""), "data-unit": entry.unit, "data-status": entry.status },
    summary,
  );
  if (entry.steps && entry.steps.length) details.append(stepsTable(entry, motion));
  if (entry.children) details.append(el("ul", {}, ...entry.children.map((c) => nodeItem(c, entry.status))));
  remember(details, key, Boolean(entry.open));
  return el("div", { class: "unit-block" }, boundaryLine(entry.boundary), details);
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

function renderTree(tree, motion) {
  const container = document.getElementById("tree");
  const counts = document.getElementById("counts");
  if (!tree) {
    counts.textContent = "";
    container.replaceChildren(el("p", { class: "muted" }, "waiting for a goal…"));
    return;
  }
  const c = tree.counts;
  counts.textContent =
    `— ${count(tree.total_units, "unit")}: ${c.SUCCESS} done, ${c.RUNNING} running, ${c.FAILURE} failed, ${c.INVALID} pending`;
  const rootLine = el("div", { class: "node root", "data-status": tree.root.status },
    statusIcon(tree.root.status), el("span", { class: "name" }, tree.root.name));
  const parts = [rootLine];
  for (const entry of tree.entries) {
    if (entry.kind === "unit") parts.push(unitEntry(entry, motion));
    else if (entry.kind === "fold") parts.push(foldEntry(entry));
    else parts.push(boundaryLine(entry));
  }
  container.replaceChildren(...parts);
}

// "1 unit", "3 units": a count with its noun in the number it takes (erobs_bt/wording.py).
function count(n, noun) {
  return n === 1 ? `${n} ${noun}` : `${n} ${noun}s`;
}

function setText(id, text) {
  document.getElementById(id).textContent = text;
}

const RESULT_TONE = { SUCCEEDED: "ok", CANCELED: "warn", ABORTED: "bad" };

function renderState(s) {
  const stateEl = document.getElementById("state");
  const result = s.result;
  const idle = s.state === "IDLE";
  stateEl.textContent = s.state;
  stateEl.dataset.state = s.state;
  // IDLE after a goal takes the tone of how that goal ended (never green over an ABORTED result).
  stateEl.dataset.tone = idle && result ? RESULT_TONE[result.status] || "" : "";
  setText("state-note", idle && result ? `— last goal ${result.goal_id} ${result.status}` : "");
  setText("state-message", s.state_message || "");
  const fault = document.getElementById("fault");
  fault.hidden = !s.fault;
  if (s.fault) {
    setText("fault-reason", `FAULTED: ${s.fault.reason}`);
    setText("fault-recovery", `To recover: ${s.fault.recovery}.`);
  }
  document.getElementById("lingering").hidden = !s.lingering;
}

// Steps done: a finished goal's completed steps (as its result line says); while it runs,
// the steps of the units that completed (from the feedback) plus, inside an executing batch,
// the steps the arm has already passed (from the live motion).
function stepsDone(result, fb, motion) {
  if (result) return result.completed_steps;
  const completed = fb ? Math.round((fb.progress_percentage * fb.total_steps) / 100) : 0;
  return motion && motion.steps ? completed + motion.step_of_unit - 1 : completed;
}

function renderProgress(s) {
  const goal = s.goal || {};
  if (goal.id) {
    const name = goal.run_name ? ` · “${goal.run_name}”` : "";
    setText("goal", `${goal.id}${name} · ${goal.mode || ""} · ` +
      `${goal.total_steps == null ? "? steps" : count(goal.total_steps, "step")} · ` +
      `${goal.units == null ? "? units" : count(goal.units, "unit")}` + (goal.eligible ? " · cache eligible" : ""));
  } else {
    setText("goal", "no goal yet");
  }
  const fb = s.feedback;
  const result = s.result;
  const total = result ? result.total_steps : fb ? fb.total_steps : goal.total_steps || 0;
  const motion = s.motion;
  const done = stepsDone(result, fb, motion);
  // One number for the bar, the count and the percentage: the steps done.
  const pct = total ? (100 * done) / total : 0;
  const progressBar = document.getElementById("progress-bar");
  progressBar.style.width = `${pct}%`;
  progressBar.parentElement.setAttribute("aria-valuenow", String(Math.round(pct)));
  const progressText = document.getElementById("progress-text");
  progressText.textContent = `${done} / ${total} steps (${Math.round(pct)} %)`;
  progressText.dataset.done = String(done);
  progressText.dataset.total = String(total);
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
  cache.textContent = s.cache ? `cache ${s.cache}` : "";
  cache.dataset.cache = s.cache || "";
  const motionEl = document.getElementById("motion");
  const bar = document.getElementById("motion-bar");
  // A motion of a unit that has ended is no longer executing (its steps table marks them all done).
  const motionUnit = motion && tree ? tree.entries.find((e) => e.kind === "unit" && e.unit === motion.unit) : null;
  const ended = motionUnit && motionUnit.status === "SUCCESS";
  if (motion && !result && !ended) {
    const step = entry && entry.steps ? entry.steps.find((st) => st.step === motion.step) : null;
    motionEl.textContent = `step ${motion.step_of_unit} of ${motion.steps} (script step ${motion.step})` +
      (step ? `: ${step.summary}` : "") +
      ` — ${Math.round(100 * motion.fraction)} % of ${motion.duration.toFixed(1)} s, ETA ${motion.eta.toFixed(1)} s`;
    motionEl.dataset.step = String(motion.step_of_unit);
    motionEl.dataset.steps = String(motion.steps);
    bar.style.width = `${100 * motion.fraction}%`;
  } else {
    motionEl.textContent = "—";
    motionEl.dataset.step = "";
    bar.style.width = "0";
  }
  // The attached tool: the backend's, else the latest feedback's.
  const tool = (s.tool && s.tool.gripper) || (fb ? fb.current_gripper : "") || "";
  const toolEl = document.getElementById("tool");
  toolEl.textContent = !tool ? "—" : tool === "none" ? "none (bare flange)" : tool;
  toolEl.dataset.tool = tool;
  setText("status-message", fb && !result ? fb.status_message : result ? "—" : fb ? fb.status_message : "—");
}

function renderResult(s) {
  const result = document.getElementById("result");
  result.hidden = !s.result;
  if (s.result) {
    const r = s.result;
    result.dataset.status = r.status;
    result.textContent = `${r.goal_id} ${r.status}` + (r.rejected ? " (rejected before anything moved)" : "") +
      `: ${r.completed_steps} / ${r.total_steps} steps` + (r.error_message ? ` — ${r.error_message}` : "");
  }
  const error = document.getElementById("last-error");
  const shownInResult = s.result && s.result.error_message === s.last_error;
  error.hidden = !s.last_error || shownInResult;
  error.textContent = s.last_error ? `last error: ${s.last_error}` : "";
  const rejected = s.rejected || [];
  document.getElementById("rejected-panel").hidden = rejected.length === 0;
  document.getElementById("rejected").replaceChildren(...rejected.slice().reverse().map((r) =>
    el("li", { class: "error" }, `${r.goal_id || "goal refused"}: ${r.error}`)));
}

function renderControls(s) {
  const state = s.state;
  document.getElementById("pause").disabled = state !== "RUNNING";
  document.getElementById("resume").disabled = state !== "PAUSED";
  document.getElementById("cancel").disabled = !["RUNNING", "COMPLETING_TASK", "PAUSED"].includes(state);
  document.getElementById("stop").disabled = state === "FAULTED";
  document.getElementById("reset-fault").disabled = state !== "FAULTED";
  const resetSim = document.getElementById("reset-simulation");
  resetSim.hidden = !s.resettable;
  resetSim.disabled = !s.resettable || !["IDLE", "FAULTED"].includes(state);
  document.getElementById("run-reset-label").hidden = !s.resettable;
  const valid = document.getElementById("validation").dataset.valid === "true";
  document.getElementById("run-script").disabled = !valid || state !== "IDLE";
  document.getElementById("preview-script").disabled = !valid || state !== "IDLE" || !validPreviewable;
  if (replyTime !== null && s.state_since > replyTime) {
    setText("reply", "");
    replyTime = null;
  }
}

function renderEvents(events) {
  const list = document.getElementById("events");
  list.replaceChildren(...events.slice().reverse().map((e) => {
    const fields = Object.entries(e)
      .filter(([k, v]) => !["t", "dt", "event"].includes(k) && v !== "")
      .map(([k, v]) => `${k}=${v}`).join(" ");
    const isError = Boolean(e.error) || String(e.detail || "").startsWith("failed");
    const dt = typeof e.dt === "number" ? `+${e.dt.toFixed(3)}` : "";
    return el("li", { class: isError ? "error" : "", "data-dt": dt }, `${dt} ${e.event} ${fields}`);
  }));
}

function render(s) {
  shared.state = s;
  renderState(s);
  renderProgress(s);
  renderResult(s);
  renderControls(s);
  renderTree(s.tree, s.result ? null : s.motion);
  renderEvents(s.events || []);
  document.body.dataset.version = String(s.version);
  document.body.dataset.goal = (s.goal && s.goal.id) || "";
}

function dispatch(name, detail) {
  document.dispatchEvent(new CustomEvent(name, { detail }));
}

function connect() {
  const connection = document.getElementById("connection");
  const source = new EventSource("/api/events");
  source.addEventListener("open", () => { connection.hidden = true; });
  source.addEventListener("error", () => { connection.hidden = source.readyState === EventSource.OPEN; });
  source.addEventListener("state", (event) => {
    const state = JSON.parse(event.data);
    connection.hidden = true;
    if (state.version !== version) {
      const goalId = state.goal ? state.goal.id || "" : "";
      for (const [unit, trajectory] of shared.trajectories) {
        if (trajectory.goal_id !== goalId) shared.trajectories.delete(unit);
      }
      version = state.version;
      render(state);
      dispatch("erobs:state", state);
    }
  });
  source.addEventListener("trajectory", (event) => {
    const trajectory = JSON.parse(event.data);
    if (shared.state && shared.state.goal && trajectory.goal_id !== shared.state.goal.id) {
      shared.trajectories.clear(); // the first trajectory of a new goal (its state follows)
    }
    shared.trajectories.set(trajectory.unit, trajectory);
    document.body.dataset.trajectories = String(shared.trajectories.size);
    dispatch("erobs:trajectory", trajectory);
  });
  source.addEventListener("joints", (event) => {
    shared.joints = JSON.parse(event.data);
    document.body.dataset.joints = shared.joints.position.map((p) => p.toFixed(3)).join(",");
    dispatch("erobs:joints", shared.joints);
  });
}

async function post(path, body, contentType) {
  const headers = { ...CONTROL_HEADER };
  if (contentType) headers["Content-Type"] = contentType;
  const response = await fetch(path, { method: "POST", headers, body });
  return { status: response.status, body: await response.json() };
}

async function control(action) {
  const reply = document.getElementById("reply");
  try {
    const { body } = await post(`/api/${action}`);
    reply.textContent = body.message || body.error || "";
    reply.dataset.success = String(Boolean(body.success));
    replyTime = typeof body.t === "number" ? body.t : null;
    if (shared.state) renderControls(shared.state);
  } catch (err) {
    reply.textContent = `${action} failed: ${err}`;
  }
}

// -- submitting a script ------------------------------------------------------------------------
let scriptName = "script";
let validPreviewable = false;

function planList(report) {
  const units = report.units || [];
  return units.map((u) => {
    const steps = (report.steps || {})[String(u.unit)] || [];
    return el("li", {}, `unit ${u.unit} (${u.kind}): ${u.label}`,
      el("ul", {}, ...steps.map((st) => el("li", { class: "muted" }, `step ${st.step}: ${st.summary}`))));
  });
}

// The same lines `erobs-bt validate SCRIPT` prints.
async function validateScript() {
  const out = document.getElementById("validation");
  const text = document.getElementById("script-text").value;
  const { body } = await post("/api/validate", text, "application/json");
  out.dataset.valid = String(Boolean(body.valid));
  if (body.valid) {
    const count = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;  // as `erobs-bt validate` words it
    out.textContent = `valid ${scriptName}: ${count(body.tasks, "task")} → ${count(body.total_steps, "step")}, ` +
      `${count(body.units.length, "unit")} · cache eligible: ${body.cache_eligible ? "yes" : "no"} · previewable: ` +
      (body.previewable ? "yes" : `no — ${body.preview_error}`);
    validPreviewable = Boolean(body.previewable);
    document.getElementById("plan").replaceChildren(...planList(body));
  } else {
    out.textContent = `invalid ${scriptName}: ${body.error}`;
    validPreviewable = false;
    document.getElementById("plan").replaceChildren();
  }
  if (shared.state) renderControls(shared.state);
  return body;
}

async function submitScript(preview) {
  const out = document.getElementById("validation");
  const text = document.getElementById("script-text").value;
  // A Run on a simulated cell starts from its initial state (unless unticked): a repeated Run
  // then starts where the first one did; the server says why when the reset is refused.
  const reset = !preview && Boolean(shared.state && shared.state.resettable) &&
    document.getElementById("run-reset").checked;
  const { status, body } = await post("/api/submit", JSON.stringify({ script: text, preview, reset }), "application/json");
  if (status === 422) {
    out.dataset.valid = "false";
    out.textContent = `invalid ${scriptName}: ${body.error}`;
  }
  const reply = document.getElementById("reply");
  reply.textContent = body.message || body.error || "";
  reply.dataset.success = String(Boolean(body.success));
  replyTime = typeof body.t === "number" ? body.t : null;
}

function scriptEdited() {
  const out = document.getElementById("validation");
  out.dataset.valid = "";
  out.textContent = "";
  validPreviewable = false;
  if (shared.state) renderControls(shared.state);
}

document.getElementById("script-file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  scriptName = file.name;
  document.getElementById("script-text").value = await file.text();
  scriptEdited();
  await validateScript();
});
document.getElementById("script-text").addEventListener("input", () => {
  if (scriptName === "script" || !document.getElementById("script-file").files.length) scriptName = "script";
  scriptEdited();
});
document.getElementById("validate").addEventListener("click", validateScript);
document.getElementById("run-script").addEventListener("click", () => submitScript(false));
document.getElementById("preview-script").addEventListener("click", () => submitScript(true));

// -- controls ---------------------------------------------------------------------------------------
for (const action of ["pause", "resume", "cancel", "stop"]) {
  document.getElementById(action).addEventListener("click", () => control(action));
}
document.getElementById("reset-simulation").addEventListener("click", () => control("reset_simulation"));
const resetDialog = document.getElementById("reset-dialog");
document.getElementById("reset-fault").addEventListener("click", () => {
  const fault = shared.state && shared.state.fault;
  setText("reset-dialog-reason", fault ? `Fault: ${fault.reason}` : "");
  resetDialog.showModal();
});
resetDialog.addEventListener("close", () => {
  if (resetDialog.returnValue === "confirm") control("reset_fault");
});

// -- other views ------------------------------------------------------------------------------------
// The 3D cell view (static/cell3d.js, its scene at /api/scene) joins the page when the server
// has it: the live arm and tool from the joint states, the latest planned or previewed
// unit's trajectory as the ghost (a new goal clears it).
async function mountCellView() {
  const response = await fetch("/api/scene");
  if (!response.ok) return;
  const scene = await response.json();
  const { createCellView } = await import("/static/cell3d.js");
  const container = document.getElementById("cell3d");
  container.hidden = false;
  const view = createCellView(container, scene);
  shared.cellView = view;
  await view.ready;
  let goal = shared.state && shared.state.goal ? shared.state.goal.id : "";
  let tool = "";
  // The attached tool, from the joint states and the picture's `tool` (the page's tool row).
  const showTool = (gripper) => {
    if (gripper && gripper !== tool) {
      tool = gripper;
      view.setTool(tool);
    }
  };
  const showJoints = (joints) => {
    view.setJointPositions(joints.name, joints.position);
    showTool(joints.gripper);
  };
  if (shared.joints) showJoints(shared.joints);
  // The picture's tools: the attached one and, when the backend tracks them, the docks'.
  const showTools = (tools) => {
    if (!tools) return;
    showTool(tools.gripper);
    if (tools.docks) view.setDocks(tools.docks);
  };
  if (shared.state) showTools(shared.state.tool);
  const latest = [...shared.trajectories.values()].at(-1);
  // The ghost's title (the bar's label and the legend): which motion it shows.
  const ghostTitle = (t) =>
    `${t.mode === "preview" ? "preview" : t.source === "cache" ? "cached plan" : "plan"} of unit ${t.unit}`;
  if (latest) view.showTrajectory(latest, { title: ghostTitle(latest) });
  document.addEventListener("erobs:joints", (event) => showJoints(event.detail));
  document.addEventListener("erobs:trajectory", (event) => {
    goal = event.detail.goal_id; // a new goal's trajectory may arrive just before its state
    view.showTrajectory(event.detail, { title: ghostTitle(event.detail) });
  });
  // The planning scene's world (the picture's `scene`): redrawn when its revision changes.
  let sceneRevision = "";
  const showScene = (world) => {
    if (world && world.revision !== sceneRevision) {
      sceneRevision = world.revision;
      view.setObstacles(world.obstacles);
    }
  };
  if (shared.state) showScene(shared.state.scene);
  document.addEventListener("erobs:state", (event) => {
    showTools(event.detail.tool);
    showScene(event.detail.scene);
    const id = event.detail.goal ? event.detail.goal.id || "" : "";
    if (id !== goal) {
      goal = id;
      view.clearTrajectory();
    }
  });
  document.body.dataset.cell3d = "ready";
}
mountCellView().catch((err) => {
  document.body.dataset.cell3d = `failed: ${err}`;
});

// The run history page, when the server has it.
fetch("/history", { method: "HEAD" }).then((response) => {
  if (response.ok) document.getElementById("nav").append(el("a", { href: "/history" }, "history"));
}).catch(() => {});

connect();
