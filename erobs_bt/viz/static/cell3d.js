// The 3D view of the cell: the UR5e from its URDF meshes, the obstacles, docks, markers and
// parts of the cell description, the attached tool, the live joint state, and a trajectory
// played as a ghost arm with a scrubber. Each tool has a colour of its own (TOOL_COLORS), a
// docked one lighter; a legend (.cell3d-legend) names the tools and, while a trajectory is
// shown, the ghost arm and its tool path.
//
//   import { createCellView } from "/static/cell3d.js";
//   const scene = await (await fetch("/api/scene")).json();     // erobs_bt/viz/scene.py
//   const view = createCellView(document.querySelector("#cell"), scene);
//   await view.ready;                                            // URDF and meshes loaded
//   view.setJointPositions(names, q_rad);                        // live /joint_states
//   view.setTool("epick");                                       // attached gripper
//   view.setObstacles(picture.scene.obstacles);                  // the planning scene's world
//   view.showTrajectory(trajectory);   // the console's trajectory JSON (erobs_bt/viz/web.py,
//                                      // "Trajectories"): {joint_names, time_from_start, positions, ...}
//   view.seek(1.5); view.play(); view.pause(); view.clearTrajectory(); view.dispose();
//
// Frames: three.js world = base_link (z up), metres, radians, as in the scene JSON.
// Libraries: three.js and urdf-loader, served from /vendor/ (npm, copied at set-up).

import * as THREE from "/vendor/three/build/three.module.js";
import { OrbitControls } from "/vendor/three/examples/jsm/controls/OrbitControls.js";
import { OBJLoader } from "/vendor/three/examples/jsm/loaders/OBJLoader.js";
import { MTLLoader } from "/vendor/three/examples/jsm/loaders/MTLLoader.js";
import URDFLoader from "/vendor/urdf-loader/src/URDFLoader.js";

const COLORS = {
  background: 0xf4f6f8,
  obstacle: 0xb7c3cf,
  table: 0xd9cdb8,
  dock: 0x6c7a89,
  dockedTool: 0x8895a3,
  tool: 0x2f6fb0,
  tcp: 0xd0342c,
  marker: 0x222222,
  part: 0xe0a030,
  ghost: 0x3a9bdc,
  path: 0x1f77b4,
};

// Each tool its own colour, so an ePick and a pipettor (both cylinders on the flange) are told
// apart at a glance: the attached tool in full colour, a docked one lighter. Tools of a cell
// description not named here take a colour of TOOL_FALLBACK by their place in the scene's tools.
const TOOL_COLORS = {
  epick: 0x2e7d32,
  pipettor: 0x8e44ad,
  hande: 0xe67e22,
  "2fg7": 0x8d6e63,
  none: 0x607d8b,
};
const TOOL_FALLBACK = [0x00897b, 0xc2185b, 0x6d4c41, 0xafb42b];

// The colour of tool `name` (a number, 0xRRGGBB).
function toolColor(scene, name) {
  if (name in TOOL_COLORS) return TOOL_COLORS[name];
  const others = Object.keys(scene.tools).filter((tool) => !(tool in TOOL_COLORS));
  return TOOL_FALLBACK[Math.max(0, others.indexOf(name)) % TOOL_FALLBACK.length];
}

// What the colours and the translucent arm mean: a legend in the view's top right corner.
// Items: the attached tool, the docked ones, and while a trajectory is shown the ghost arm
// and its tool path (what the scheduled motion will do; the solid arm is the robot now).
function legendItem(kind, swatch, text) {
  const item = document.createElement("div");
  item.dataset.legend = kind;
  item.style.cssText = "display:flex;align-items:center;gap:6px;white-space:nowrap;min-width:0";
  const mark = document.createElement("span");
  mark.className = "cell3d-swatch";
  mark.style.cssText = `display:inline-block;flex:none;width:12px;height:12px;border-radius:2px;${swatch}`;
  const label = document.createElement("span");
  label.style.cssText = "overflow:hidden;text-overflow:ellipsis";
  label.textContent = text;
  item.append(mark, label);
  return item;
}

function hex(color) {
  return `#${color.toString(16).padStart(6, "0")}`;
}

function applyPose(object, pose) {
  object.position.fromArray(pose.xyz);
  object.quaternion.set(pose.quat_xyzw[0], pose.quat_xyzw[1], pose.quat_xyzw[2], pose.quat_xyzw[3]);
}

// A shape of the scene JSON (shape_msgs/SolidPrimitive sizes; cylinder axis = local z).
function shapeMesh(shape, material) {
  let geometry;
  if (shape.shape === "box") {
    geometry = new THREE.BoxGeometry(shape.size[0], shape.size[1], shape.size[2]);
  } else if (shape.shape === "cylinder") {
    geometry = new THREE.CylinderGeometry(shape.size[1], shape.size[1], shape.size[0], 40);
    geometry.rotateX(Math.PI / 2); // three's cylinder axis is y; the cell's is z
  } else {
    geometry = new THREE.SphereGeometry(shape.size[0], 32, 16);
  }
  const mesh = new THREE.Mesh(geometry, material);
  mesh.name = shape.name;
  applyPose(mesh, shape.pose);
  const edges = new THREE.LineSegments(
    new THREE.EdgesGeometry(geometry, 30),
    new THREE.LineBasicMaterial({ color: 0x4a5866, transparent: true, opacity: 0.45 }),
  );
  mesh.add(edges);
  return mesh;
}

function toolGroup(tool, material, { showTcp = true } = {}) {
  const group = new THREE.Group();
  group.name = `tool:${tool.name}`;
  for (const shape of tool.shapes) group.add(shapeMesh(shape, material));
  if (showTcp) {
    const tcp = new THREE.Mesh(
      new THREE.SphereGeometry(0.006, 16, 8),
      new THREE.MeshBasicMaterial({ color: COLORS.tcp }),
    );
    tcp.name = "tcp";
    applyPose(tcp, tool.tcp);
    group.add(tcp);
  }
  return group;
}

// Positions of a trajectory at time t [s] (linear between points).
function sampleTrajectory(points, t) {
  if (t <= points[0].time_from_start) return points[0].positions;
  const last = points[points.length - 1];
  if (t >= last.time_from_start) return last.positions;
  let lo = 0;
  let hi = points.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (points[mid].time_from_start <= t) lo = mid;
    else hi = mid;
  }
  const a = points[lo];
  const b = points[hi];
  const span = b.time_from_start - a.time_from_start;
  const u = span > 0 ? (t - a.time_from_start) / span : 1;
  return a.positions.map((value, i) => value + u * (b.positions[i] - value));
}

// An OBJ mesh with its MTL materials. UR's OBJ files carry a few stray polyline (`l`)
// records; three's OBJLoader would then draw the whole object as lines, so they are dropped.
function loadObjWithMtl(manager, path, done) {
  const folder = path.slice(0, path.lastIndexOf("/") + 1);
  const file = path.slice(folder.length);
  const parse = (materials) => {
    const text = new THREE.FileLoader(manager);
    text.load(
      path,
      (obj) => {
        const loader = new OBJLoader();
        if (materials) loader.setMaterials(materials);
        done(loader.parse(obj.replace(/^l .*$/gm, "")));
      },
      undefined,
      (error) => done(null, error),
    );
  };
  const mtl = new MTLLoader(manager);
  mtl.setPath(folder);
  mtl.load(
    file.replace(/\.obj$/i, ".mtl"),
    (materials) => {
      materials.preload();
      parse(materials);
    },
    undefined,
    () => parse(null),
  );
}

/**
 * Create the 3D view in `container` (an element with a size) from the scene JSON of
 * /api/scene. Returns the view's API (see the header); `ready` is a promise that resolves
 * once the URDF and every mesh are loaded, and rejects when the robot cannot be loaded.
 */
export function createCellView(container, scene, options = {}) {
  const jointNames = scene.robot.joint_names;
  const root = document.createElement("div");
  root.className = "cell3d";
  root.style.cssText = "position:relative;width:100%;height:100%;min-height:240px;overflow:hidden";
  container.appendChild(root);

  const renderer = new THREE.WebGLRenderer({ antialias: true, preserveDrawingBuffer: true });
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  renderer.outputColorSpace = THREE.SRGBColorSpace;
  renderer.domElement.className = "cell3d-canvas";
  renderer.domElement.style.cssText = "display:block;width:100%;height:100%";
  root.appendChild(renderer.domElement);

  const world = new THREE.Scene();
  world.background = new THREE.Color(COLORS.background);
  const camera = new THREE.PerspectiveCamera(40, 1, 0.01, 50);
  camera.up.set(0, 0, 1);
  camera.position.fromArray(options.cameraPosition || [1.5, -1.4, 1.15]);
  const controls = new OrbitControls(camera, renderer.domElement);
  controls.target.fromArray(options.cameraTarget || [-0.12, -0.1, 0.18]);
  controls.enableDamping = false;
  controls.update();

  world.add(new THREE.HemisphereLight(0xffffff, 0x8090a0, 2.2));
  const sun = new THREE.DirectionalLight(0xffffff, 1.6);
  sun.position.set(1.5, -1.0, 2.5);
  world.add(sun);
  const fill = new THREE.DirectionalLight(0xffffff, 0.6);
  fill.position.set(-1.5, 1.5, 1.0);
  world.add(fill);

  const tableTop = Math.min(0, ...scene.obstacles.filter((o) => o.name === "table").map((o) => o.pose.xyz[2] + o.size[2] / 2));
  const grid = new THREE.GridHelper(2, 20, 0x9aa7b4, 0xd0d7de);
  grid.rotateX(Math.PI / 2);
  grid.position.z = tableTop - 0.001;
  world.add(grid);
  world.add(new THREE.AxesHelper(0.15));

  // Cell: obstacles, docks (with the tools stored there), markers, parts.
  const cell = new THREE.Group();
  cell.name = "cell";
  world.add(cell);
  const obstacleMaterial = new THREE.MeshStandardMaterial({ color: COLORS.obstacle, roughness: 0.85, transparent: true, opacity: 0.9 });
  const tableMaterial = new THREE.MeshStandardMaterial({ color: COLORS.table, roughness: 0.9 });
  // The planning scene's world: the cell's obstacles and those added at run time (setObstacles).
  const obstacles = new THREE.Group();
  obstacles.name = "obstacles";
  cell.add(obstacles);
  function fillObstacles(list) {
    for (const child of [...obstacles.children]) {
      obstacles.remove(child);
      child.traverse((part) => { if (part.geometry) part.geometry.dispose(); });
    }
    for (const obstacle of list) {
      obstacles.add(shapeMesh(obstacle, obstacle.name === "table" ? tableMaterial : obstacleMaterial));
    }
  }
  fillObstacles(scene.obstacles);
  // One material per tool: attached (full colour) and docked (lighter, translucent).
  const toolMaterials = new Map();
  function toolMaterial(name, docked) {
    const key = `${name}:${docked ? "docked" : "attached"}`;
    if (!toolMaterials.has(key)) {
      const color = new THREE.Color(toolColor(scene, name));
      toolMaterials.set(key, docked
        ? new THREE.MeshStandardMaterial({ color: color.lerp(new THREE.Color(0xffffff), 0.35), roughness: 0.6, transparent: true, opacity: 0.8 })
        : new THREE.MeshStandardMaterial({ color, roughness: 0.5, metalness: 0.2 }));
    }
    return toolMaterials.get(key);
  }
  const docks = new Map();
  for (const dock of scene.docks) {
    const frame = new THREE.Group();
    frame.name = `dock:${dock.number}`;
    // A cell that places its docks nowhere (no approach pose): the stored tool is listed only.
    if (dock.pose) applyPose(frame, dock.pose);
    else frame.visible = false;
    const ring = new THREE.Mesh(
      new THREE.CylinderGeometry(0.045, 0.045, 0.006, 32).rotateZ(Math.PI / 2),
      new THREE.MeshStandardMaterial({ color: COLORS.dock, roughness: 0.7 }),
    );
    ring.name = "seat";
    frame.add(ring); // the seat, centred on the flange, across the flange x axis
    const holder = new THREE.Group();
    holder.name = "stored";
    frame.add(holder);
    cell.add(frame);
    docks.set(dock.number, { frame, holder, gripper: null });
  }
  for (const marker of scene.markers) {
    const plate = new THREE.Mesh(
      new THREE.PlaneGeometry(marker.size, marker.size),
      new THREE.MeshBasicMaterial({ color: COLORS.marker, side: THREE.DoubleSide }),
    );
    plate.name = `marker:${marker.id}`;
    applyPose(plate, marker.pose);
    plate.position.z += 0.0005;
    cell.add(plate);
  }
  const partMaterial = new THREE.MeshStandardMaterial({ color: COLORS.part, roughness: 0.6 });
  for (const part of scene.parts) cell.add(shapeMesh(part, partMaterial));

  // State shared by the API.
  let robot = null;
  let ghost = null;
  let attachedTool = null;
  let ghostTool = null;
  let toolName = scene.tool.gripper;
  let live = scene.joint_positions.slice();
  let meshesLoaded = 0;
  let trajectory = null;
  let time = 0;
  let playing = false;
  let lastFrame = 0;
  let pathLine = null;
  let disposed = false;

  // Controls of the ghost: play/pause, scrubber, time.
  const bar = document.createElement("div");
  bar.className = "cell3d-bar";
  bar.style.cssText =
    "position:absolute;left:8px;right:8px;bottom:8px;display:none;gap:8px;align-items:center;" +
    "padding:6px 10px;background:rgba(255,255,255,.88);border:1px solid #c8d0d8;border-radius:6px;font:13px system-ui,sans-serif";
  const playButton = document.createElement("button");
  playButton.type = "button";
  playButton.className = "cell3d-play";
  playButton.textContent = "Play";
  const scrubber = document.createElement("input");
  scrubber.type = "range";
  scrubber.className = "cell3d-scrubber";
  scrubber.min = "0";
  scrubber.max = "1000";
  scrubber.step = "1";
  scrubber.value = "0";
  scrubber.style.flex = "1";
  const clock = document.createElement("span");
  clock.className = "cell3d-time";
  clock.style.cssText = "min-width:9em;text-align:right;font-variant-numeric:tabular-nums";
  const label = document.createElement("span");
  label.className = "cell3d-label";
  label.style.cssText = "color:#3a9bdc;font-weight:600";
  bar.append(label, playButton, scrubber, clock);
  root.appendChild(bar);

  const loading = document.createElement("div");
  loading.className = "cell3d-status";
  loading.style.cssText = "position:absolute;left:10px;top:8px;font:12px system-ui,sans-serif;color:#56616c";
  loading.textContent = "loading the UR5e…";
  root.appendChild(loading);

  const legend = document.createElement("div");
  legend.className = "cell3d-legend";
  legend.setAttribute("aria-label", "legend of the 3D view");
  legend.style.cssText =
    "position:absolute;right:8px;top:8px;max-width:calc(100% - 16px);overflow:hidden;" +
    "display:flex;flex-direction:column;gap:3px;padding:6px 9px;" +
    "background:rgba(255,255,255,.88);border:1px solid #c8d0d8;border-radius:6px;font:12px system-ui,sans-serif;color:#1f2a33";
  root.appendChild(legend);

  function updateLegend() {
    const items = [];
    if (scene.tools[toolName]) {
      const item = legendItem("tool", `background:${hex(toolColor(scene, toolName))}`,
        toolName === "none" ? "bare flange (no tool)" : `${toolName} — attached tool`);
      item.dataset.tool = toolName;
      items.push(item);
    }
    for (const [number, dock] of docks) {
      if (!dock.gripper) continue;
      const color = new THREE.Color(toolColor(scene, dock.gripper)).lerp(new THREE.Color(0xffffff), 0.35);
      const item = legendItem("docked", `background:#${color.getHexString()};opacity:.8`, `${dock.gripper} — in dock ${number}`);
      item.dataset.tool = dock.gripper;
      items.push(item);
    }
    if (trajectory) {
      items.push(legendItem("ghost", `background:${hex(COLORS.ghost)};opacity:.45;border:1px dashed ${hex(COLORS.ghost)}`,
        `ghost arm — ${label.textContent || "planned motion"}, not the robot's position`));
      items.push(legendItem("path", `height:0;border-top:2px solid ${hex(COLORS.path)}`, "tool path of that motion"));
    }
    legend.replaceChildren(...items);
  }

  function duration() {
    return trajectory ? trajectory.points[trajectory.points.length - 1].time_from_start : 0;
  }

  function setRobotJoints(target, names, q) {
    if (!target) return;
    for (let i = 0; i < names.length; i++) {
      if (target.joints[names[i]]) target.joints[names[i]].setJointValue(q[i]);
    }
  }

  function orderedPositions(names, positions) {
    return jointNames.map((name) => positions[names.indexOf(name)]);
  }

  function updateGhost() {
    if (!trajectory || !ghost) return;
    setRobotJoints(ghost, trajectory.joint_names, sampleTrajectory(trajectory.points, time));
    const total = duration();
    scrubber.value = String(total > 0 ? Math.round((1000 * time) / total) : 1000);
    clock.textContent = `${time.toFixed(2)} / ${total.toFixed(2)} s`;
    playButton.textContent = playing ? "Pause" : "Play";
  }

  function buildTool(name, material, showTcp) {
    const tool = scene.tools[name];
    return tool ? toolGroup(tool, material, { showTcp }) : null;
  }

  function attachTool() {
    if (!robot) return;
    const flange = robot.links[scene.robot.flange_link];
    if (attachedTool) attachedTool.removeFromParent();
    attachedTool = buildTool(toolName, toolMaterial(toolName, false), true);
    if (attachedTool) flange.add(attachedTool);
    updateLegend();
    if (ghost) {
      if (ghostTool) ghostTool.removeFromParent();
      ghostTool = buildTool(toolName, ghostMaterial, false);
      if (ghostTool) ghost.links[scene.robot.flange_link].add(ghostTool);
    }
  }

  function fillDocks(contents) {
    for (const [number, dock] of docks) {
      const gripper = contents[number] ?? null;
      if (dock.gripper === gripper) continue;
      dock.holder.clear();
      dock.gripper = gripper;
      if (gripper) {
        const stored = buildTool(gripper, toolMaterial(gripper, true), false);
        if (stored) dock.holder.add(stored);
      }
    }
    updateLegend();
  }
  fillDocks(Object.fromEntries(scene.docks.map((d) => [d.number, d.gripper])));

  const ghostMaterial = new THREE.MeshStandardMaterial({
    color: COLORS.ghost,
    transparent: true,
    opacity: 0.35,
    depthWrite: false,
    roughness: 0.6,
  });

  // The robot: URDF + OBJ/MTL meshes through one loading manager, so `ready` waits for all.
  const ready = new Promise((resolve, reject) => {
    const manager = new THREE.LoadingManager();
    const loader = new URDFLoader(manager);
    loader.parseCollision = false;
    loader.loadMeshCb = (path, meshManager, _urdfMaterial, done) => {
      loadObjWithMtl(meshManager, path, (object, error) => {
        if (object) meshesLoaded += 1;
        done(object, error);
      });
    };
    let loaded = null;
    manager.onLoad = () => {
      if (!loaded || disposed) return;
      robot = loaded;
      world.add(robot);
      setRobotJoints(robot, jointNames, live);
      ghost = robot.clone();
      ghost.name = "ghost";
      ghost.traverse((node) => {
        if (node.isMesh) {
          node.material = ghostMaterial;
          node.renderOrder = 2;
        }
      });
      ghost.visible = false;
      world.add(ghost);
      attachTool();
      loading.remove();
      render();
      resolve(api);
    };
    manager.onError = (url) => {
      loading.textContent = `could not load ${url}`;
      reject(new Error(`cell3d: could not load ${url}`));
    };
    loader.load(
      scene.robot.urdf,
      (result) => {
        loaded = result;
      },
      undefined,
      (error) => {
        loading.textContent = `could not load the robot: ${error.message}`;
        reject(error);
      },
    );
  });

  function resize() {
    const width = root.clientWidth || 640;
    const height = root.clientHeight || 480;
    renderer.setSize(width, height, false);
    camera.aspect = width / height;
    camera.updateProjectionMatrix();
  }

  function render() {
    if (disposed) return;
    resize();
    renderer.render(world, camera);
  }

  function frame(now) {
    if (disposed) return;
    if (playing && trajectory) {
      const dt = lastFrame ? (now - lastFrame) / 1000 : 0;
      time = Math.min(duration(), time + dt * (api.speed || 1));
      if (time >= duration()) playing = false;
      updateGhost();
    }
    lastFrame = now;
    render();
    requestAnimationFrame(frame);
  }
  requestAnimationFrame(frame);
  controls.addEventListener("change", render);

  function drawPath() {
    if (pathLine) {
      pathLine.removeFromParent();
      pathLine.geometry.dispose();
      pathLine = null;
    }
    if (!trajectory || !ghost) return;
    const flange = ghost.links[scene.robot.flange_link];
    const tcp = (scene.tools[toolName] || { tcp: { xyz: [0, 0, 0] } }).tcp.xyz;
    const points = [];
    const samples = Math.min(240, Math.max(2, trajectory.points.length));
    const total = duration();
    for (let i = 0; i < samples; i++) {
      setRobotJoints(ghost, trajectory.joint_names, sampleTrajectory(trajectory.points, (total * i) / (samples - 1)));
      ghost.updateMatrixWorld(true);
      points.push(new THREE.Vector3().fromArray(tcp).applyMatrix4(flange.matrixWorld));
    }
    pathLine = new THREE.Line(
      new THREE.BufferGeometry().setFromPoints(points),
      new THREE.LineBasicMaterial({ color: COLORS.path }),
    );
    pathLine.name = "path";
    world.add(pathLine);
  }

  playButton.addEventListener("click", () => (playing ? api.pause() : api.play()));
  scrubber.addEventListener("input", () => {
    playing = false;
    api.seek((Number(scrubber.value) / 1000) * duration());
  });

  const api = {
    ready,
    speed: 1,
    scene,
    /** Live arm state: `names` (UR joint names) and positions [rad] in that order. */
    setJointPositions(names, q) {
      live = orderedPositions(names, q);
      setRobotJoints(robot, jointNames, live);
      render();
    },
    /** The attached tool (a gripper name of the scene's `tools`). */
    setTool(name) {
      if (name === toolName) return;
      toolName = name;
      attachTool();
      render();
    },
    /** The planning scene's world now: [shape] of the scene JSON (replaces every obstacle drawn). */
    setObstacles(list) {
      fillObstacles(list || []);
      render();
    },
    /** The tools stored in the docks now: {dock number: gripper name or null}. */
    setDocks(contents) {
      fillDocks(contents);
      render();
    },
    /** Play `traj` as a ghost: {joint_names, time_from_start: [s], positions: [[rad]], segments?}. */
    showTrajectory(traj, { autoplay = false, title = "trajectory" } = {}) {
      if (!traj || !traj.positions || traj.positions.length === 0) {
        api.clearTrajectory();
        return;
      }
      const points = traj.positions.map((positions, i) => ({ positions, time_from_start: traj.time_from_start[i] }));
      trajectory = { joint_names: traj.joint_names || jointNames, points, segments: traj.segments || [] };
      time = 0;
      playing = autoplay;
      label.textContent = title;
      bar.style.display = "flex";
      updateLegend();
      ready.then(() => {
        if (!trajectory) return;
        ghost.visible = true;
        drawPath();
        updateGhost();
        render();
      });
    },
    clearTrajectory() {
      trajectory = null;
      playing = false;
      bar.style.display = "none";
      updateLegend();
      if (ghost) ghost.visible = false;
      drawPath();
      render();
    },
    play() {
      if (!trajectory) return;
      if (time >= duration()) time = 0;
      playing = true;
      lastFrame = 0;
      updateGhost();
    },
    pause() {
      playing = false;
      updateGhost();
    },
    /** Put the ghost at `t` seconds of the trajectory (clamped). */
    seek(t) {
      time = Math.max(0, Math.min(duration(), t));
      updateGhost();
      render();
    },
    get time() {
      return time;
    },
    get duration() {
      return duration();
    },
    get playing() {
      return playing;
    },
    /** What is loaded, for tests and the status line. */
    info() {
      const joints = robot ? Object.values(robot.joints).filter((j) => j.jointType !== "fixed").map((j) => j.name) : [];
      // Triangles of the visual meshes of each link (URDFVisual children of the link).
      const links = {};
      if (robot) {
        for (const [name, link] of Object.entries(robot.links)) {
          let triangles = 0;
          for (const visual of link.children.filter((child) => child.isURDFVisual)) {
            visual.traverse((node) => {
              if (node.isMesh) triangles += (node.geometry.index ? node.geometry.index.count : node.geometry.attributes.position.count) / 3;
            });
          }
          links[name] = triangles;
        }
      }
      // The colour the attached tool is drawn in (of its meshes' material), "#rrggbb".
      const toolMesh = attachedTool ? attachedTool.children.find((node) => node.isMesh && node.name !== "tcp") : null;
      const drawnToolColor = toolMesh ? `#${toolMesh.material.color.getHexString()}` : "";
      return {
        loaded: Boolean(robot), joints, meshFiles: meshesLoaded, links, tool: toolName,
        toolColor: drawnToolColor, trajectory: Boolean(trajectory),
        obstacles: obstacles.children.map((mesh) => mesh.name),
      };
    },
    /** World (= base_link) pose of a link: {xyz: [m], quat_xyzw}; `ghost` for the ghost arm. */
    linkPose(name, { ghostArm = false } = {}) {
      const target = ghostArm ? ghost : robot;
      if (!target || !target.links[name]) return null;
      target.updateMatrixWorld(true);
      const position = new THREE.Vector3();
      const quaternion = new THREE.Quaternion();
      target.links[name].matrixWorld.decompose(position, quaternion, new THREE.Vector3());
      return { xyz: position.toArray(), quat_xyzw: quaternion.toArray() };
    },
    /** Render now (after the page changed the container's size). */
    render,
    dispose() {
      disposed = true;
      controls.dispose();
      renderer.dispose();
      root.remove();
    },
  };
  return api;
}
