// The run-history page: lists the run logs (/api/runs) and replays one goal of one run
// (/api/runs/{id}) over a timeline scrubber: the tree's statuses (tree, tree_status
// records), the arm in the 3D view (joint_state), the tool (tool), the orchestrator's state
// and events; a previewed trajectory (trajectory) plays as the 3D view's ghost.
// The record kinds are documented in erobs_bt/viz/runlog.py; the page opens the run named
// by the URL's `#run=<id>&goal=<goal id>`.
//
// For tests: window.erobsHistory = {ready, open(id, goal), seek(t), play(), snapshot(), view}.

import { createCellView } from "/static/cell3d.js";

const $ = (selector) => document.querySelector(selector);

function utc(seconds) {
  return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19);
}

// Joint samples are written at most 20 times a second while the arm moves, and not at rest:
// a gap longer than HOLD_GAP [s] means the arm rested at the earlier sample until shortly
// (LEAD [s], two sample periods) before the later one, so it is held there, not drifted.
const HOLD_GAP = 0.25;
const LEAD = 0.1;

function interpolate(samples, t) {
  if (!samples.length) return null;
  if (t <= samples[0].t) return samples[0].q;
  const last = samples[samples.length - 1];
  if (t >= last.t) return last.q;
  let lo = 0;
  let hi = samples.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (samples[mid].t <= t) lo = mid;
    else hi = mid;
  }
  const a = samples[lo];
  const b = samples[hi];
  const from = b.t - a.t > HOLD_GAP ? b.t - LEAD : a.t;
  if (t <= from) return a.q;
  const u = b.t > from ? (t - from) / (b.t - from) : 1;
  return a.q.map((value, i) => value + u * (b.q[i] - value));
}

function lastAt(items, t) {
  let found = null;
  for (const item of items) {
    if (item.t > t) break;
    found = item;
  }
  return found;
}

// The replay model of one goal's records; times are relative to its first record [s].
function buildTimeline(records, jointNames) {
  const t0 = records.length ? records[0].t : 0;
  const timeline = {
    t0,
    duration: records.length ? records[records.length - 1].t - t0 : 0,
    nodes: [],
    children: [],
    statusChanges: [],
    joints: [],
    tools: [],
    states: [],
    events: [],
    trajectories: [],
    result: null,
  };
  for (const record of records) {
    const t = record.t - t0;
    switch (record.event) {
      case "tree":
        timeline.nodes = record.nodes.map(([parent, name, type]) => ({ parent, name, type }));
        timeline.children = timeline.nodes.map(() => []);
        timeline.nodes.forEach((node, index) => {
          if (node.parent >= 0) timeline.children[node.parent].push(index);
        });
        break;
      case "tree_status":
        timeline.statusChanges.push({ t, changes: record.changes });
        break;
      case "joint_state": {
        const q = jointNames.map((name) => record.position[record.name.indexOf(name)]);
        timeline.joints.push({ t, q });
        break;
      }
      case "tool":
        timeline.tools.push({ t, gripper: record.gripper });
        break;
      case "trajectory":
        timeline.trajectories.push({ t, trajectory: record.trajectory });
        break;
      case "state":
        timeline.states.push({ t, state: record.state, message: record.message || "" });
        break;
      default:
        if (record.event === "goal_finished") timeline.result = record;
        timeline.events.push({ t, record });
    }
  }
  return timeline;
}

function describeEvent(record) {
  const parts = [];
  if (record.unit !== undefined) parts.push(`unit ${record.unit}`);
  parts.push(record.event);
  for (const key of ["label", "status", "detail", "error", "mode"]) {
    if (record[key]) parts.push(String(record[key]));
  }
  if (typeof record.seconds === "number") parts.push(`${record.seconds.toFixed(3)} s`);
  return parts.join(" · ");
}

class Replay {
  constructor(view, scene) {
    this.view = view;
    this.scene = scene;
    this.timeline = null;
    this.time = 0;
    this.playing = false;
    this.statuses = [];
    this.applied = 0;
    this.lastFrame = 0;
    this.currentSignature = "";
    this.unitRows = new Map();
    this.trajectoryShown = null;
    requestAnimationFrame((now) => this.frame(now));
  }

  load(records) {
    this.timeline = buildTimeline(records, this.scene.robot.joint_names);
    this.statuses = this.timeline.nodes.map(() => "INVALID");
    this.applied = 0;
    this.currentSignature = "";
    this.trajectoryShown = null;
    this.view.clearTrajectory();
    this.renderUnits();
    $("#timeline").hidden = false;
    const notes = [];
    if (!this.timeline.joints.length) notes.push("this run log has no joint states (an older log, or a run without motion)");
    if (!this.timeline.nodes.length) notes.push("no tree was recorded");
    $("#replay-note").textContent = notes.join("; ");
    this.seek(0);
  }

  renderUnits() {
    const list = $("#units");
    list.replaceChildren();
    this.unitRows.clear();
    const tl = this.timeline;
    if (!tl.nodes.length) return;
    for (const index of tl.children[0]) {
      const node = tl.nodes[index];
      const row = document.createElement("li");
      row.textContent = node.name;
      row.dataset.node = String(index);
      row.dataset.status = "INVALID";
      if (node.name.startsWith("before unit")) {
        row.classList.add("boundary");
        row.hidden = true;
      }
      const unit = /^unit (\d+):/.exec(node.name);
      if (unit) row.dataset.unit = unit[1];
      list.appendChild(row);
      this.unitRows.set(index, row);
    }
  }

  applyStatuses(t) {
    const changes = this.timeline.statusChanges;
    if (this.applied > 0 && changes[this.applied - 1].t > t) {
      this.statuses = this.timeline.nodes.map(() => "INVALID");
      this.applied = 0;
    }
    while (this.applied < changes.length && changes[this.applied].t <= t) {
      for (const [index, status] of changes[this.applied].changes) this.statuses[index] = status;
      this.applied += 1;
    }
  }

  currentUnitNode() {
    const tl = this.timeline;
    if (!tl.nodes.length) return -1;
    let reached = -1;
    for (const index of tl.children[0]) {
      if (!tl.nodes[index].name.startsWith("unit ")) continue;
      const status = this.statuses[index];
      if (status === "RUNNING" || status === "FAILURE") return index;
      if (status !== "INVALID") reached = index;
    }
    return reached;
  }

  renderTree() {
    const tl = this.timeline;
    const counts = { SUCCESS: 0, RUNNING: 0, FAILURE: 0, INVALID: 0 };
    for (const [index, row] of this.unitRows) {
      const status = this.statuses[index];
      if (row.dataset.status !== status) row.dataset.status = status;
      if (row.classList.contains("boundary")) row.hidden = status !== "RUNNING";
      else counts[status] = (counts[status] || 0) + 1;
    }
    $("#tree-counts").textContent = `${counts.SUCCESS} done, ${counts.RUNNING} running, ${counts.FAILURE} failed, ${counts.INVALID} pending`;
    const current = this.currentUnitNode();
    const signature = current < 0 ? "" : `${current}:${this.subtree(current).map((i) => this.statuses[i][0]).join("")}`;
    if (signature === this.currentSignature) return;
    this.currentSignature = signature;
    const box = $("#current");
    box.replaceChildren();
    if (current < 0) return;
    const depth0 = this.depth(current);
    for (const index of this.subtree(current)) {
      const line = document.createElement("div");
      line.dataset.status = this.statuses[index];
      line.dataset.node = String(index);
      line.textContent = `${"  ".repeat(this.depth(index) - depth0)}${tl.nodes[index].name}  ${this.statuses[index]}`;
      box.appendChild(line);
    }
    const row = this.unitRows.get(current);
    if (row) row.scrollIntoView({ block: "nearest" });
  }

  subtree(index) {
    const out = [index];
    for (const child of this.timeline.children[index]) out.push(...this.subtree(child));
    return out;
  }

  depth(index) {
    let depth = 0;
    for (let node = this.timeline.nodes[index]; node.parent >= 0; node = this.timeline.nodes[node.parent]) depth += 1;
    return depth;
  }

  renderEvents(t) {
    const list = $("#events");
    list.replaceChildren();
    const shown = this.timeline.events.filter((e) => e.t <= t).slice(-10);
    shown.forEach((item, i) => {
      const line = document.createElement("li");
      line.textContent = `+${item.t.toFixed(2)}  ${describeEvent(item.record)}`;
      if (i === shown.length - 1) line.classList.add("latest");
      if (item.record.error && item.record.status !== "CANCELED") line.classList.add("error");
      list.appendChild(line);
    });
  }

  seek(t) {
    const tl = this.timeline;
    if (!tl) return;
    this.time = Math.max(0, Math.min(tl.duration, t));
    const q = interpolate(tl.joints, this.time);
    if (q) this.view.setJointPositions(this.scene.robot.joint_names, q);
    const tool = lastAt(tl.tools, this.time);
    if (tool) this.view.setTool(tool.gripper);
    $("#replay-tool").textContent = tool ? `tool: ${tool.gripper}` : "";
    const state = lastAt(tl.states, this.time);
    const badge = $("#replay-state");
    badge.textContent = state ? state.state : "";
    badge.dataset.state = state ? state.state : "";
    badge.title = state ? state.message : "";
    const preview = lastAt(tl.trajectories, this.time);
    if (preview && preview !== this.trajectoryShown) {
      this.trajectoryShown = preview;
      this.view.showTrajectory(preview.trajectory, { title: "previewed" });
    }
    this.applyStatuses(this.time);
    this.renderTree();
    this.renderEvents(this.time);
    $("#scrubber").value = String(tl.duration > 0 ? Math.round((1000 * this.time) / tl.duration) : 1000);
    $("#clock").textContent = `+${this.time.toFixed(2)} / ${tl.duration.toFixed(2)} s`;
    $("#play").textContent = this.playing ? "Pause" : "Play";
  }

  play() {
    if (!this.timeline) return;
    if (this.time >= this.timeline.duration) this.seek(0);
    this.playing = true;
    this.lastFrame = 0;
    $("#play").textContent = "Pause";
  }

  pause() {
    this.playing = false;
    $("#play").textContent = "Play";
  }

  frame(now) {
    if (this.playing && this.timeline) {
      const dt = this.lastFrame ? (now - this.lastFrame) / 1000 : 0;
      const speed = Number($("#speed").value) || 1;
      const next = this.time + dt * speed;
      if (next >= this.timeline.duration) this.playing = false;
      this.seek(next);
    }
    this.lastFrame = now;
    requestAnimationFrame((later) => this.frame(later));
  }

  snapshot() {
    const units = {};
    for (const [index, row] of this.unitRows) if (row.dataset.unit) units[row.dataset.unit] = this.statuses[index];
    return {
      time: this.time,
      duration: this.timeline ? this.timeline.duration : 0,
      state: $("#replay-state").textContent,
      tool: $("#replay-tool").textContent.replace(/^tool: /, ""),
      units,
      joints: this.timeline ? interpolate(this.timeline.joints, this.time) : null,
      samples: this.timeline ? this.timeline.joints.length : 0,
    };
  }
}

// Stands in for the 3D view when the server has none.
const NO_VIEW = {
  ready: Promise.resolve(),
  setJointPositions() {},
  setTool() {},
  showTrajectory() {},
  clearTrajectory() {},
};

async function getJson(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `${url}: HTTP ${response.status}`);
  return body;
}

function renderRuns(listing, onPick) {
  const body = $("#runs tbody");
  body.replaceChildren();
  $("#folders").textContent = listing.folders.join(", ");
  $("#runs-empty").hidden = listing.runs.length > 0;
  for (const run of listing.runs) {
    const goals = run.goals.length ? run.goals : [{ goal_id: "", status: run.error ? "unreadable" : "empty" }];
    for (const goal of goals) {
      const row = document.createElement("tr");
      row.dataset.run = run.id;
      row.dataset.goal = goal.goal_id;
      row.dataset.status = goal.status;
      const length = goal.finished && goal.started ? `${(goal.finished - goal.started).toFixed(1)} s` : "";
      const cells = [
        utc(goal.started || run.started),
        run.name.replace(/\.jsonl$/, "").replace(/^\d{8}T\d{6}Z_/, ""), // the start time is the first column
        `${goal.goal_id}${goal.mode ? ` (${goal.mode})` : ""}`,
        goal.status,
        goal.total_steps ? `${goal.completed_steps}/${goal.total_steps}` : "",
        length,
      ];
      cells.forEach((text, i) => {
        const cell = document.createElement("td");
        cell.textContent = text;
        if (i === 1) {
          cell.className = "name";
          cell.title = run.file;
        }
        if (i === 3) cell.className = "status";
        row.appendChild(cell);
      });
      if (run.error) row.title = run.error;
      row.addEventListener("click", () => onPick(run.id, goal.goal_id));
      body.appendChild(row);
    }
  }
}

async function main() {
  // Without the 3D view on the server (no /api/scene), the replay shows the tree and events only.
  let scene = null;
  try {
    scene = await getJson("/api/scene");
  } catch (error) {
    $("#cell").textContent = `no 3D view: ${error.message}`;
  }
  const view = scene ? createCellView($("#cell"), scene) : NO_VIEW;
  scene = scene || { robot: { joint_names: [] } };
  const replay = new Replay(view, scene);
  let opened = null;

  async function open(runId, goalId) {
    const run = await getJson(`/api/runs/${encodeURIComponent(runId)}`);
    const goals = run.goals;
    let goal = goals.find((g) => g.goal_id === goalId);
    if (!goal) goal = [...goals].reverse().find((g) => g.motion) || goals[goals.length - 1];
    const select = $("#goal");
    select.replaceChildren(
      ...goals.map((g) => {
        const option = document.createElement("option");
        option.value = g.goal_id;
        option.textContent = `${g.goal_id} ${g.mode} ${g.status}`;
        return option;
      }),
    );
    select.hidden = goals.length < 2;
    select.onchange = () => open(runId, select.value);
    $("#replay-title").textContent = `${run.file.split("/").pop()}`;
    document.querySelectorAll("#runs tbody tr").forEach((row) => {
      row.classList.toggle("selected", row.dataset.run === runId && (!goal || row.dataset.goal === goal.goal_id));
    });
    if (!goal) {
      $("#replay-note").textContent = "this run log has no goal";
      return null;
    }
    select.value = goal.goal_id;
    history.replaceState(null, "", `#run=${encodeURIComponent(runId)}&goal=${encodeURIComponent(goal.goal_id)}`);
    await view.ready;
    replay.load(run.records.filter((r) => r.goal_id === goal.goal_id));
    opened = { run: runId, goal: goal.goal_id };
    return opened;
  }

  async function refresh() {
    renderRuns(await getJson("/api/runs"), (runId, goalId) => open(runId, goalId));
  }

  $("#refresh").addEventListener("click", refresh);
  $("#play").addEventListener("click", () => (replay.playing ? replay.pause() : replay.play()));
  $("#scrubber").addEventListener("input", () => {
    replay.pause();
    replay.seek((Number($("#scrubber").value) / 1000) * (replay.timeline ? replay.timeline.duration : 0));
  });

  await refresh();
  const wanted = new URLSearchParams(location.hash.slice(1));
  if (wanted.get("run")) await open(wanted.get("run"), wanted.get("goal"));
  return {
    view,
    replay,
    open,
    refresh,
    seek: (t) => replay.seek(t),
    play: () => replay.play(),
    snapshot: () => ({ ...replay.snapshot(), opened }),
  };
}

const ready = main();
window.erobsHistory = { ready };
ready.then((api) => Object.assign(window.erobsHistory, api)).catch((error) => {
  $("#replay-note").textContent = `error: ${error.message}`;
});
