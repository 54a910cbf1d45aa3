"""The ``pickup_tip`` and ``pickup_vial`` macros and the vision-target configuration.

Both macros address one element of a rack laid out as a grid next to a fiducial
marker: ``pickup_tip`` a pipette tip in the tip rack (vision target ``tip_rack``),
``pickup_vial`` a vial in the vial rack (``vial_rack``). Macros expand *before
anything else* (docs/behaviour.md §1): step counts, batching, the cache key and
validation all see the expanded list, so a macro costs nothing at run time and its
steps are ordinary ``moveto`` / ``vision_moveto`` / ``pipettor`` steps. The expansion
reproduces EROBS's (``beambot`` task parser), which is what fixes
``FULL_EXPERIMENT_RUN.json`` at 37 steps and 18 units:

1. ``moveto`` to the target's ``scan_pose`` (omitted when it is empty);
2. ``vision_moveto`` to the marker (``tag_id`` = the target's ``marker_id``);
3. the target's ``moves`` in order, each a straight ``cartesian`` relative move in the
   tool frame: a ``{direction, distance}`` object as written, ``column_offset`` /
   ``row_offset`` replaced by the move from the marker to the element's column / row
   (skipped when shorter than 1 µm);
4. ``pickup_vial`` with ``pipettor_operation`` only: the pipettor step(s) just before
   the last move (which must therefore be a retreat object). ``SUCK``/``EXPEL`` give
   one step; ``RINSE`` gives ``SUCK, EXPEL`` × ``rinse_count`` (default 2) + ``SUCK``.
   ``volume_pct`` defaults to 0.5.

The element is ``row``/``col`` (both, 0-based) or ``element_index`` (row-major,
default 0). Along each axis the move is
``offset + index * pitch * (+1 if increasing == direction else -1)``, taken along
``direction`` when the result is >= 0 and along the opposite direction otherwise.

The default configuration of each target comes from ``config/vision_targets.yaml``
(schema in :meth:`VisionTargets.load`); a macro task's ``config`` object overrides
it key by key, and its ``grid`` object overrides the default ``grid`` key by key
(``moves`` is replaced as a whole). Errors name where the offending value came from:
``tasks[6].config.grid.rows`` for an override, ``vision_targets.yaml:
vial_rack.grid.rows`` for the default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from erobs_bt.paths import config_file
from erobs_bt.script import _values as v
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.limits import DEFAULT_LIMITS, Limits

#: Macro task type -> the vision target it addresses.
TASK_MACROS: Mapping[str, str] = MappingProxyType({"pickup_tip": "tip_rack", "pickup_vial": "vial_rack"})

#: Tool-frame directions a grid move may use, with their opposites.
GRID_OPPOSITES: Mapping[str, str] = MappingProxyType(
    {
        "forward": "backward",
        "backward": "forward",
        "left": "right",
        "right": "left",
        "up": "down",
        "down": "up",
    }
)

#: The pipettor operations ``pickup_vial`` accepts (``RINSE`` expands to several steps).
VIAL_OPERATIONS: tuple[str, ...] = ("SUCK", "EXPEL", "RINSE")

#: The file holding the default vision targets of the simulated cell: ``config/vision_targets.yaml``
#: of :func:`erobs_bt.paths.share_dir` (source checkout, or the installed ``share/erobs_bt``).
DEFAULT_VISION_TARGETS_PATH: Path = config_file("vision_targets.yaml")

#: Grid pitch when neither ``pitch`` nor ``row_pitch``/``col_pitch`` is given [m]
#: (9 mm, the SBS well pitch of a 96-tip rack; EROBS's default).
DEFAULT_PITCH = 0.009

#: Offsets at or below this are not moved along [m] (EROBS: 1e-6).
_NEGLIGIBLE = 1e-6

_TARGET_KEYS = ("mode", "marker_id", "scan_pose", "marker_offset", "grid", "moves", "start_gripper")
_GRID_KEYS = (
    "rows",
    "cols",
    "pitch",
    "row_pitch",
    "col_pitch",
    "row_offset",
    "col_offset",
    "row_direction",
    "col_direction",
    "row_increasing",
    "col_increasing",
)
_MARKER_OFFSET_KEYS = ("x", "y", "z")
_AXIS_OFFSET = {"column_offset": "col", "row_offset": "row"}


@dataclass(frozen=True)
class GridAxis:
    """One axis (rows or columns) of a rack grid.

    Attributes:
        pitch: distance between neighbouring elements [m], > 0.
        offset: distance from the marker to the first element along ``direction`` [m].
        direction: tool-frame direction from the marker towards the first element.
        increasing: tool-frame direction in which the index increases; ``direction``
            or its opposite.
    """

    pitch: float
    offset: float
    direction: str
    increasing: str

    def move(self, index: int) -> tuple[str, float]:
        """The relative move from the marker to element ``index`` (0-based) on this axis.

        Returns:
            ``(direction, distance [m])`` with ``distance >= 0``.
        """
        offset = self.offset + index * self.pitch * (1 if self.increasing == self.direction else -1)
        return (self.direction if offset >= 0 else GRID_OPPOSITES[self.direction]), abs(offset)


@dataclass(frozen=True)
class GridTarget:
    """A validated grid vision target (one entry of ``vision_targets.yaml``, after overrides).

    Attributes:
        name: ``tip_rack`` or ``vial_rack``.
        marker_id: the fiducial marker next to the rack (ArUco id).
        scan_pose: pose name to look at the marker from; ``""`` for no scan move.
        rows: number of rows; cols: number of columns.
        row: the row axis; col: the column axis.
        moves: after the marker alignment, ``"column_offset"``, ``"row_offset"`` or
            ``(direction, distance [m])``.
    """

    name: str
    marker_id: int
    scan_pose: str
    rows: int
    cols: int
    row: GridAxis
    col: GridAxis
    moves: tuple[str | tuple[str, float], ...]


class _Origin:
    """Names where a key of a merged (default + override) target configuration came from."""

    def __init__(
        self,
        target: str,
        source: str,
        override: Mapping[str, Any] | None = None,
        task_path: str = "",
    ) -> None:
        self.target = target
        self.source = source
        self.override = override or {}
        self.task_path = task_path

    def __call__(self, key: str, sub: str | None = None) -> str:
        overridden = key in self.override
        if sub is not None:
            inner = self.override.get(key)
            overridden = isinstance(inner, Mapping) and sub in inner
            key = f"{key}.{sub}"
        if overridden:
            return f"{self.task_path}.config.{key}"
        return f"{self.source}: {self.target}.{key}"


def _grid_target(name: str, config: Mapping[str, Any], where: _Origin) -> GridTarget:
    """Validate a merged target configuration (EROBS's rules, our error paths)."""
    for key in config:
        if key not in _TARGET_KEYS:
            raise ScriptError(where(str(key)), f"unknown field (allowed: {', '.join(sorted(_TARGET_KEYS))})")
    if config.get("mode") != "grid":
        raise ScriptError(where("mode"), f"must be 'grid' (got {v.shown(config.get('mode'))})")
    marker_id = v.integer(config.get("marker_id"), where("marker_id"), minimum=0)
    scan_pose = v.string(config.get("scan_pose", ""), where("scan_pose"), allow_empty=True)
    if "start_gripper" in config:
        v.string(config["start_gripper"], where("start_gripper"))

    grid = v.mapping(config.get("grid"), where("grid"))
    for key in grid:
        if key not in _GRID_KEYS:
            raise ScriptError(
                where("grid", str(key)), f"unknown field (allowed: {', '.join(sorted(_GRID_KEYS))})"
            )
    rows = v.integer(grid.get("rows"), where("grid", "rows"), minimum=1)
    cols = v.integer(grid.get("cols"), where("grid", "cols"), minimum=1)
    pitch = v.number(grid.get("pitch", DEFAULT_PITCH), where("grid", "pitch"), unit="m", positive=True)

    marker_offset = v.mapping(config.get("marker_offset", {}), where("marker_offset"))
    for key in marker_offset:
        if key not in _MARKER_OFFSET_KEYS:
            raise ScriptError(f"{where('marker_offset')}.{key}", "unknown field (allowed: x, y, z)")
    marker = {
        key: v.number(marker_offset.get(key, 0.0), f"{where('marker_offset')}.{key}", unit="m")
        for key in _MARKER_OFFSET_KEYS
    }

    axes: dict[str, GridAxis] = {}
    for axis, axis_name, default_direction, marker_key in (
        ("col", "column", "left", "x"),
        ("row", "row", "up", "y"),
    ):
        axis_pitch = v.number(
            grid.get(f"{axis}_pitch", pitch), where("grid", f"{axis}_pitch"), unit="m", positive=True
        )
        direction = v.choice(
            grid.get(f"{axis}_direction", default_direction),
            where("grid", f"{axis}_direction"),
            tuple(GRID_OPPOSITES),
            what="direction",
        )
        away = GRID_OPPOSITES[direction]
        increasing = v.choice(
            grid.get(f"{axis}_increasing", away),
            where("grid", f"{axis}_increasing"),
            tuple(GRID_OPPOSITES),
            what="direction",
        )
        if increasing not in (direction, away):
            raise ScriptError(
                where("grid", f"{axis}_increasing"),
                f"must follow the {axis_name} axis ({direction} or {away}, got {increasing!r})",
            )
        offset = v.number(
            grid.get(f"{axis}_offset", abs(marker[marker_key])), where("grid", f"{axis}_offset"), unit="m"
        )
        axes[axis] = GridAxis(axis_pitch, offset, direction, increasing)

    raw_moves = config.get("moves")
    if not isinstance(raw_moves, list | tuple) or not raw_moves:
        raise ScriptError(where("moves"), f"must be a non-empty list (got {v.shown(raw_moves)})")
    moves: list[str | tuple[str, float]] = []
    for index, move in enumerate(raw_moves):
        move_path = f"{where('moves')}[{index}]"
        if isinstance(move, str) and move in _AXIS_OFFSET:
            moves.append(move)
        elif isinstance(move, Mapping):
            for key in move:
                if key not in ("direction", "distance"):
                    raise ScriptError(f"{move_path}.{key}", "unknown field (allowed: direction, distance)")
            direction = v.choice(
                move.get("direction"), f"{move_path}.direction", tuple(GRID_OPPOSITES), what="direction"
            )
            distance = v.number(move.get("distance"), f"{move_path}.distance", unit="m", positive=True)
            moves.append((direction, distance))
        else:
            raise ScriptError(
                move_path, f"must be column_offset, row_offset, or a move object (got {v.shown(move)})"
            )
    return GridTarget(name, marker_id, scan_pose, rows, cols, axes["row"], axes["col"], tuple(moves))


def _frozen(value: Any) -> Any:
    """A read-only deep copy of decoded YAML (mappings → MappingProxyType, lists → tuples)."""
    if isinstance(value, Mapping):
        return MappingProxyType({key: _frozen(item) for key, item in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_frozen(item) for item in value)
    return value


@dataclass(frozen=True)
class VisionTargets:
    """The default configuration of the grid vision targets used by the macros.

    Attributes:
        source: the file name (or a label) used in error messages.
        raw: target name -> its configuration as written (read-only), the base that a
            macro's ``config`` override is merged onto.
        targets: target name -> the validated :class:`GridTarget` without overrides.
    """

    source: str
    raw: Mapping[str, Mapping[str, Any]]
    targets: Mapping[str, GridTarget]

    @classmethod
    def load(cls, path: str | Path, *, limits: Limits = DEFAULT_LIMITS) -> VisionTargets:
        """Read a vision-target file with ``yaml.safe_load`` and validate every entry.

        Schema (all distances in metres, directions in the tool frame of the
        attached gripper: ``forward``, ``backward``, ``left``, ``right``, ``up``,
        ``down``)::

            <target name>:              # tip_rack (pickup_tip), vial_rack (pickup_vial)
              mode: grid                # required; the only mode
              marker_id: 25             # required; ArUco id of the marker by the rack, >= 0
              scan_pose: vial_scan      # optional pose name to view the marker from ("" = none)
              start_gripper: pipettor   # optional, informational: the tool the target is for
              marker_offset: {x: 0.0, y: -0.058}  # optional; defaults of the first-element
                                        # offsets: col_offset = |x|, row_offset = |y|
              grid:
                rows: 2                 # required, > 0
                cols: 5                 # required, > 0
                pitch: 0.009            # optional, > 0 (default 0.009)
                row_pitch: 0.044        # optional, > 0 (default pitch)
                col_pitch: 0.022        # optional, > 0 (default pitch)
                row_offset: 0.080       # optional; marker -> first row along row_direction
                col_offset: 0.003       # optional; marker -> first column along col_direction
                row_direction: up       # optional (default up): marker -> first row
                col_direction: right    # optional (default left): marker -> first column
                row_increasing: down    # optional (default: opposite of row_direction)
                col_increasing: right   # optional (default: opposite of col_direction)
              moves:                    # required, non-empty, run after the marker alignment
                - {direction: backward, distance: 0.020}
                - column_offset         # replaced by the move to the element's column
                - row_offset            # replaced by the move to the element's row
                - {direction: forward, distance: 0.065}
                - {direction: backward, distance: 0.065}   # pickup_vial: must end with a retreat

        Unknown keys are errors (they are typos, and a typo in a rack geometry moves
        the robot somewhere else).

        Args:
            path: the YAML file.
            limits: ``max_file_bytes`` bounds the file size, ``max_poses`` the entries.

        Returns:
            The validated configuration; ``source`` is the file name.

        Raises:
            ScriptError: invalid YAML or content, naming the file and key
                (``vision_targets.yaml: vial_rack.grid.rows: must be an integer >= 1``).
            OSError: the file cannot be read.
        """
        data = v.load_yaml_file(path, max_bytes=limits.max_file_bytes)
        return cls.from_mapping({} if data is None else data, source=Path(path).name, limits=limits)

    @classmethod
    def from_mapping(
        cls, data: Any, *, source: str = "<vision_targets>", limits: Limits = DEFAULT_LIMITS
    ) -> VisionTargets:
        """Validate already-decoded data (``target name -> configuration``) like :meth:`load`.

        Raises:
            ScriptError: at ``<source>: <target>.<key>``.
        """
        if not isinstance(data, Mapping):
            raise ScriptError(source, "must be a mapping of target name to configuration")
        if len(data) > limits.max_poses:
            raise ScriptError(source, f"has {len(data)} targets; the limit is {limits.max_poses}")
        raw: dict[str, Mapping[str, Any]] = {}
        targets: dict[str, GridTarget] = {}
        for name, config in data.items():
            if not isinstance(name, str) or not name.strip():
                raise ScriptError(source, f"target names must be non-empty strings (got {v.shown(name)})")
            if not isinstance(config, Mapping):
                raise ScriptError(f"{source}: {name}", f"must be a mapping (got {v.shown(config)})")
            targets[name] = _grid_target(name, config, _Origin(name, source))
            raw[name] = _frozen(config)
        return cls(source, MappingProxyType(raw), MappingProxyType(targets))

    @classmethod
    def default(cls, *, limits: Limits = DEFAULT_LIMITS) -> VisionTargets:
        """Load :data:`DEFAULT_VISION_TARGETS_PATH` (``config/vision_targets.yaml``).

        Raises:
            ScriptError: the file's content is invalid.
            OSError: the file cannot be read.
        """
        return cls.load(DEFAULT_VISION_TARGETS_PATH, limits=limits)

    def resolve(self, target: str, override: Mapping[str, Any], task_path: str) -> GridTarget:
        """Merge a macro's ``config`` override onto the default of ``target`` and validate.

        Args:
            target: ``tip_rack`` or ``vial_rack``.
            override: the macro task's ``config`` (``{}`` for none).
            task_path: the macro task's path, for errors in overridden keys.

        Raises:
            ScriptError: EROBS's ``missing or invalid vision_targets.<target>
                configuration`` when there is neither a default nor an override; otherwise
                at the overriding key (``tasks[6].config.grid.rows``) or the default one.
        """
        base = self.raw.get(target)
        if base is None and not override:
            raise ScriptError(task_path, f"missing or invalid vision_targets.{target} configuration")
        if not override and target in self.targets:
            return self.targets[target]
        base = base or {}
        override_grid = override.get("grid", {})
        if not isinstance(override_grid, Mapping):
            raise ScriptError(f"{task_path}.config.grid", f"must be an object (got {v.shown(override_grid)})")
        merged: dict[str, Any] = {**base, **override}
        if isinstance(base.get("grid"), Mapping):
            merged["grid"] = {**base["grid"], **override_grid}
        return _grid_target(target, merged, _Origin(target, self.source, override, task_path))


@dataclass(frozen=True)
class ExpandedTask:
    """One entry of the task list after macro expansion (not yet validated).

    Attributes:
        path: ``tasks[3]``, or ``tasks[6] (pickup_vial step 3)`` for a generated step.
        spec: the step as JSON-able data; a copy of the task for ordinary tasks.
        task_index: index of the originating entry in the script's ``tasks``.
        macro: the macro that generated it, or ``None``.
    """

    path: str
    spec: dict[str, Any]
    task_index: int
    macro: str | None = None


def _element(task: Mapping[str, Any], task_path: str, grid: GridTarget) -> tuple[int, int]:
    """The (row, col) a macro task addresses."""
    if "row" in task or "col" in task:
        if "row" not in task or "col" not in task:
            raise ScriptError(task_path, "must provide both row and col")
        row = v.integer(task["row"], f"{task_path}.row")
        col = v.integer(task["col"], f"{task_path}.col")
    else:
        index = v.integer(task.get("element_index", 0), f"{task_path}.element_index")
        row, col = divmod(index, grid.cols)
    if not (0 <= row < grid.rows and 0 <= col < grid.cols):
        raise ScriptError(
            task_path, f"row={row}, col={col} out of range (max: {grid.rows - 1}, {grid.cols - 1})"
        )
    return row, col


def expand_macro(
    task: Mapping[str, Any],
    task_path: str,
    targets: VisionTargets,
    *,
    budget: int,
) -> list[dict[str, Any]]:
    """Expand one ``pickup_tip`` / ``pickup_vial`` task into step specs.

    Args:
        task: the macro task (``task_type`` already checked).
        task_path: its path (``tasks[6]``).
        targets: the default vision targets.
        budget: the most steps the expansion may produce (what is left of
            ``Limits.max_steps``).

    Returns:
        The generated steps as JSON-able dicts, in order (see the module docstring).

    Raises:
        ScriptError: bad macro fields or configuration, or more than ``budget`` steps.
    """
    macro = task["task_type"]
    override = task.get("config", {})
    if not isinstance(override, Mapping):
        raise ScriptError(f"{task_path}.config", f"must be an object (got {v.shown(override)})")
    grid = targets.resolve(TASK_MACROS[macro], override, task_path)
    moves_path = _Origin(grid.name, targets.source, override, task_path)("moves")
    row, col = _element(task, task_path, grid)
    axis_moves = {"row": grid.row.move(row), "col": grid.col.move(col)}

    move_steps: list[dict[str, Any]] = []
    for move in grid.moves:
        if isinstance(move, str):
            direction, distance = axis_moves[_AXIS_OFFSET[move]]
            if distance <= _NEGLIGIBLE:
                continue
        else:
            direction, distance = move
        move_steps.append(
            {
                "task_type": "moveto",
                "planning_type": "cartesian",
                "direction": direction,
                "distance": round(distance, 6),
            }
        )

    operation = task.get("pipettor_operation")
    if macro == "pickup_vial" and operation not in (None, ""):
        operation = v.choice(operation, f"{task_path}.pipettor_operation", VIAL_OPERATIONS, what="operation")
        if not move_steps or isinstance(grid.moves[-1], str):
            raise ScriptError(moves_path, "must end with a retreat move (an object) for pipettor_operation")
        volume = v.number(task.get("volume_pct", 0.5), f"{task_path}.volume_pct", minimum=0.0, maximum=1.0)
        operations = [operation]
        if operation == "RINSE":
            count = v.integer(task.get("rinse_count", 2), f"{task_path}.rinse_count", minimum=1)
            if 2 * count + 1 > budget:
                raise ScriptError(
                    f"{task_path}.rinse_count",
                    f"{count} rinses expand to {2 * count + 1} pipettor steps, more than the "
                    f"{budget} left under Limits.max_steps",
                )
            operations = ["SUCK", "EXPEL"] * count + ["SUCK"]
        move_steps[-1:-1] = [
            {"task_type": "pipettor", "operation": op, "volume_pct": volume} for op in operations
        ]

    expanded: list[dict[str, Any]] = []
    if grid.scan_pose:
        expanded.append({"task_type": "moveto", "target": grid.scan_pose})
    expanded.append({"task_type": "vision_moveto", "tag_id": grid.marker_id})
    expanded.extend(move_steps)
    return expanded


def expand_macros(
    tasks: Sequence[Mapping[str, Any]],
    *,
    vision_targets: VisionTargets | Callable[[], VisionTargets],
    limits: Limits = DEFAULT_LIMITS,
) -> list[ExpandedTask]:
    """Expand every macro of a task list; other tasks are copied through.

    Args:
        tasks: the script's ``tasks``, each an object with a valid ``task_type``.
        vision_targets: the default vision targets, or a function returning them
            (called at most once, and only when a macro is present).
        limits: ``max_steps`` bounds the expanded length.

    Returns:
        The expanded list, in order.

    Raises:
        ScriptError: a macro is invalid, or the expanded list exceeds ``limits.max_steps``
            (reported at the task where it does).
    """
    loaded: VisionTargets | None = vision_targets if isinstance(vision_targets, VisionTargets) else None
    expanded: list[ExpandedTask] = []
    for index, task in enumerate(tasks):
        path = f"tasks[{index}]"
        task_type = task["task_type"]
        if task_type in TASK_MACROS:
            if loaded is None:
                loaded = vision_targets() if not isinstance(vision_targets, VisionTargets) else vision_targets
            budget = limits.max_steps - len(expanded)
            specs = expand_macro(task, path, loaded, budget=budget)
            generated = [
                ExpandedTask(f"{path} ({task_type} step {k})", spec, index, task_type)
                for k, spec in enumerate(specs, start=1)
            ]
        else:
            generated = [ExpandedTask(path, dict(task), index)]
        if len(expanded) + len(generated) > limits.max_steps:
            raise ScriptError(
                path,
                f"the expanded script has more than {limits.max_steps} steps (Limits.max_steps)",
            )
        expanded.extend(generated)
    return expanded
