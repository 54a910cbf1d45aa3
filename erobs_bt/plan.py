"""The goal plan: the one way script text becomes what a goal runs (docs/design.md §1).

Every front end turns a script into a :class:`GoalPlan` here and nowhere else: ``erobs-bt
validate``, ``render``, ``export``, ``run`` and ``preview``, the orchestrator (and so the
ROS node and the live web view, which submit through it). So a script that one of them
accepts, every one accepts, with the same message for the same mistake.

Two pieces:

* :class:`ScriptParser` — the parser *configured from the cell*: the cell's vocabulary
  (grippers and their states, named states, docks; :class:`CellVocabulary`, read from the
  cell configuration), the pose registry, the vision targets of the macros and the size
  limits. :meth:`ScriptParser.from_files` builds it from the same files the engine uses.
* :func:`plan_goal` — parse (validate, expand macros, resolve poses), group into units
  (``group_into_batches``), and decide cache eligibility and previewability.

Nothing here imports the simulated cell, the planner or py_trees: validating a script
costs a JSON parse and two small YAML reads.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from erobs_bt.batching import Unit, group_into_batches
from erobs_bt.script.errors import ScriptError
from erobs_bt.script.limits import DEFAULT_LIMITS, Limits
from erobs_bt.script.macros import VisionTargets
from erobs_bt.script.model import MOTION_TASK_TYPES, Script
from erobs_bt.script.parse import parse_script
from erobs_bt.script.poses import PoseRegistry
from erobs_bt.script.vocabulary import DEFAULT_CELL_PATH, CellVocabulary

if TYPE_CHECKING:  # validate reads the vocabulary only: no cell model (numpy) at run time
    from erobs_bt.world.cell import CellConfig

__all__ = [
    "DEFAULT_POSES_PATH",
    "GoalPlan",
    "NotPreviewableError",
    "ScriptParser",
    "check_previewable",
    "is_eligible",
    "plan_goal",
    "plan_script",
    "pose_registry_file",
    "pose_registry_source",
]

#: The packaged pose registry, measured on the packaged cell (``config/poses.yaml``): the
#: registry every front end uses when none is given and the cell is the packaged one.
DEFAULT_POSES_PATH: Path = DEFAULT_CELL_PATH.parent / "poses.yaml"

#: The file name of a cell's own pose registry, beside its cell configuration.
CELL_POSES_NAME = "poses.yaml"


def pose_registry_file(cell: Path | str | None, poses: Path | str | None) -> Path | None:
    """The pose-registry file a front end loads: ``poses`` when given, else the cell's.

    The default follows the cell: with the packaged cell (``cell`` is ``None``) it is the
    packaged :data:`DEFAULT_POSES_PATH`; with a cell configuration of one's own it is the
    ``poses.yaml`` beside that file, when there is one (so a lab's cell directory holds
    both), and otherwise none: the packaged poses were measured on the packaged cell and
    must not steer another arm. ``erobs-bt`` (``--poses``) and the node (``poses_file``)
    both decide here.

    Args:
        cell: the cell configuration file, or ``None`` for the packaged one.
        poses: the registry file given by the user, or ``None``.

    Returns:
        The file to load, or ``None`` for no registry.
    """
    if poses is not None:
        return Path(poses)
    candidate = DEFAULT_POSES_PATH if cell is None else Path(cell).parent / CELL_POSES_NAME
    return candidate if candidate.is_file() else None


def describe_pose_registry(
    cell: Path | str | None, poses: Path | str | None, *, option: str = "--poses"
) -> str:
    """``pose registry: config/poses.yaml (default of the packaged cell; another with
    --poses)`` — which registry :func:`pose_registry_file` chose and why, for the front
    ends' start-up line; ``option`` is how the user gives another (the node's
    ``poses_file``). A beamline's registry is named as the beamline names it
    (:func:`pose_registry_source`), not as the copy the compiled cell reads."""
    chosen = pose_registry_file(cell, poses)
    origin = _beamline_origin(cell) if poses is None else None
    if origin is not None:
        beamline = _shown_path(Path(origin["file"]))
        if chosen is None or not origin.get("poses_file"):
            return (
                f"pose registry: none (the beamline {beamline} names no poses_file; give one with {option})"
            )
        shown = _shown_path(Path(origin["poses_file"]))
        return f"pose registry: {shown} (poses_file of the beamline {beamline}; another with {option})"
    if chosen is None:
        return f"pose registry: none (no {CELL_POSES_NAME} beside {cell}; give one with {option})"
    if poses is not None:
        return f"pose registry: {_shown_path(chosen)}"
    whose = "the packaged cell" if cell is None else f"the cell {cell}"
    return f"pose registry: {_shown_path(chosen)} (default of {whose}; another with {option})"


def pose_registry_source(cell: Path | str | None, poses: Path | str | None) -> Path | None:
    """The user's own file for the registry :func:`pose_registry_file` chooses: that file,
    or, for a cell compiled from an EROBS beamline file, the beamline's ``poses_file`` (the
    compiled cell reads a copy of it in the cache directory, which no user wrote)."""
    chosen = pose_registry_file(cell, poses)
    origin = _beamline_origin(cell) if poses is None and chosen is not None else None
    if origin is not None and origin.get("poses_file"):
        return Path(origin["poses_file"])
    return chosen


def _beamline_origin(cell: Path | str | None) -> Any:
    """The beamline a compiled cell was made from (:func:`erobs_bt.world.beamline.compiled_from`),
    else ``None``."""
    if cell is None:
        return None
    from erobs_bt.world.beamline import compiled_from

    return compiled_from(cell)


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


#: What a user is told when validation itself fails (a bug): no internal exception text.
INTERNAL_ERROR = (
    "the script could not be validated because of an internal error in erobs_bt "
    "(the traceback is in the log); please report it with the script"
)


class NotPreviewableError(ValueError):
    """A preview was requested for a script with steps other than moveto/end_effector.

    Attributes:
        total_steps: steps of the script after macro expansion (for the goal's result).
    """

    def __init__(self, message: str, *, total_steps: int = 0) -> None:
        super().__init__(message)
        self.total_steps = total_steps


def preview_problem(script: Script) -> str:
    """Why ``script`` cannot be previewed, or ``""`` when it can.

    Preview supports only ``moveto`` and ``end_effector`` (docs/script-format.md). The
    text starts with EROBS's refusal (its orchestrator's ``Dry-run not supported for:``
    list of 1-based steps and their task types, which EROBS's clients and its agent's
    error table match), then gives erobs_bt's script paths, e.g. ``Dry-run not supported
    for: step 4 (tool_exchange), step 9 (pause). Preview supports only moveto and
    end_effector steps; not previewable: tasks[3], tasks[8]``.
    """
    offending = [s for s in script.steps if s.task_type not in MOTION_TASK_TYPES]
    if not offending:
        return ""
    steps = ", ".join(f"step {s.index + 1} ({s.script_type})" for s in offending)
    paths = ", ".join(s.path for s in offending)
    return (
        f"Dry-run not supported for: {steps}. "
        f"Preview supports only moveto and end_effector steps; not previewable: {paths}"
    )


def check_previewable(script: Script) -> None:
    """Raise when ``script`` cannot be previewed.

    Raises:
        NotPreviewableError: with :func:`preview_problem`'s text.
    """
    problem = preview_problem(script)
    if problem:
        raise NotPreviewableError(problem, total_steps=len(script.steps))


def is_eligible(units: tuple[Unit, ...] | list[Unit]) -> bool:
    """True when the goal's entire task list forms exactly one batched unit (plan-cache
    eligibility, docs/script-format.md "When a plan can be reused")."""
    return len(units) == 1 and units[0].batched


@dataclass(frozen=True)
class GoalPlan:
    """Everything known about a goal before anything moves.

    Attributes:
        script: the validated, expanded script.
        units: its units (the pause/cancel granularity), in order.
        enable_batching: whether consecutive moveto/end_effector steps were grouped.
        eligible: the plan cache may replay it (exactly one batched unit).
        preview_error: why it cannot be previewed; ``""`` when it can.
    """

    script: Script
    units: tuple[Unit, ...]
    enable_batching: bool
    eligible: bool
    preview_error: str

    @property
    def previewable(self) -> bool:
        """Only moveto/end_effector steps: a preview (dry run) may plan it."""
        return not self.preview_error

    @property
    def total_steps(self) -> int:
        """Steps after macro expansion."""
        return len(self.script.steps)

    @property
    def key_document(self) -> str:
        """The normalised JSON of expanded steps and resolved poses (the cache-key input)."""
        return self.script.key_document()

    @property
    def key_sha256(self) -> str:
        """SHA-256 of :attr:`key_document` (the ``validate`` report's ``key sha256``)."""
        return hashlib.sha256(self.key_document.encode()).hexdigest()

    def check_previewable(self) -> None:
        """Raise unless the plan can be previewed.

        Raises:
            NotPreviewableError: :attr:`preview_error`, with :attr:`total_steps`.
        """
        if self.preview_error:
            raise NotPreviewableError(self.preview_error, total_steps=self.total_steps)

    def describe(self) -> dict[str, Any]:
        """The plan as JSON-able data (``erobs-bt validate --json``)."""
        return {
            "start_gripper": self.script.start_gripper,
            "tasks": self.script.task_count,
            "total_steps": self.total_steps,
            "units": [
                {
                    "unit": unit.index + 1,
                    "kind": "batch" if unit.batched else "single",
                    "steps": [step.index + 1 for step in unit.steps],
                    "label": unit.label,
                }
                for unit in self.units
            ],
            "cache_eligible": self.eligible,
            "previewable": self.previewable,
            "preview_error": self.preview_error,
            "key_sha256": self.key_sha256,
            "warnings": list(self.script.warnings),
        }


@dataclass(frozen=True)
class ScriptParser:
    """The script parser configured from the cell (the one parser configuration).

    Calling it parses a script with the cell's vocabulary, the pose registry and the
    vision targets (:func:`erobs_bt.script.parse.parse_script`).

    Attributes:
        vocabulary: the cell's grippers, gripper states, named states and docks.
        registry: the pose registry, or ``None``.
        vision_targets: the macros' vision targets (``config/vision_targets.yaml``).
        limits: size limits.
    """

    vocabulary: CellVocabulary
    registry: PoseRegistry | None = None
    vision_targets: VisionTargets | None = field(default=None, compare=False)
    limits: Limits = DEFAULT_LIMITS

    def __call__(self, text: str | bytes) -> Script:
        """Parse ``text`` (UTF-8 when bytes).

        Raises:
            ScriptError: the script is invalid (the message starts with the path).
        """
        return parse_script(
            text,
            registry=self.registry,
            limits=self.limits,
            vocabulary=self.vocabulary,
            vision_targets=self.vision_targets,
        )

    @classmethod
    def from_files(
        cls,
        *,
        cell: Path | str | None = None,
        poses: Path | str | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> ScriptParser:
        """The parser for a cell configuration file and a pose registry file.

        Args:
            cell: the cell YAML (``None``: the packaged ``config/cell.yaml``); a
                ``vision_targets.yaml`` beside it replaces the packaged vision targets.
            poses: the pose-registry YAML (degrees), or ``None`` for none.
            limits: size limits.

        Raises:
            ScriptError: the cell, the registry or ``config/vision_targets.yaml`` is invalid
                (the message names the file and key).
            OSError: a file cannot be read.
        """
        vocabulary = CellVocabulary.default() if cell is None else CellVocabulary.load(cell, limits=limits)
        registry = PoseRegistry.load(poses, limits=limits) if poses is not None else None
        return cls(vocabulary, registry, _vision_targets(cell, limits), limits)

    @classmethod
    def for_cell(
        cls,
        cell: CellConfig,
        *,
        poses: Path | str | None = None,
        limits: Limits = DEFAULT_LIMITS,
    ) -> ScriptParser:
        """The parser for a cell already loaded (:func:`erobs_bt.world.config.load_cell`, once
        per engine): its vocabulary, read with it, is not read again.

        Args:
            cell: the cell; its ``source`` locates a ``vision_targets.yaml`` beside it (as
                :meth:`from_files`); a cell built in code (no vocabulary) has the packaged
                cell's.
            poses: the pose-registry YAML (degrees), or ``None`` for none.
            limits: size limits.

        Raises:
            ScriptError: the registry or the vision targets are invalid (the message names
                the file and key).
            OSError: a file cannot be read.
        """
        vocabulary = cell.vocabulary if cell.vocabulary is not None else CellVocabulary.default()
        registry = PoseRegistry.load(poses, limits=limits) if poses is not None else None
        return cls(vocabulary, registry, _vision_targets(cell.source or None, limits), limits)

    @classmethod
    def default(cls) -> ScriptParser:
        """The parser of the packaged cell, without a pose registry (built once)."""
        return _default_parser()


def _vision_targets(cell: Path | str | None, limits: Limits) -> VisionTargets:
    """The vision targets of a cell file: a ``vision_targets.yaml`` beside it (a compiled
    beamline carries its own), else the packaged ones."""
    beside = Path(cell).parent / "vision_targets.yaml" if cell is not None else None
    if beside is not None and beside.is_file():
        return VisionTargets.load(beside, limits=limits)
    return VisionTargets.default(limits=limits)


@functools.lru_cache(maxsize=1)
def _default_parser() -> ScriptParser:
    return ScriptParser(CellVocabulary.load(DEFAULT_CELL_PATH), None, VisionTargets.default())


def plan_goal(
    text: str | bytes,
    *,
    parser: Callable[[str | bytes], Script] | None = None,
    enable_batching: bool = True,
    preview: bool = False,
) -> GoalPlan:
    """Turn script text into its goal plan.

    Args:
        text: the script (a goal's ``full_json``, or a file's bytes: UTF-8, a byte-order
            mark is ignored).
        parser: the configured parser (:class:`ScriptParser`); ``None`` for
            :meth:`ScriptParser.default`.
        enable_batching: the ``enable_batching`` parameter (``False``: one unit per step).
        preview: the plan is for a preview (dry run): refuse it unless it is previewable.

    Returns:
        The plan: script, units, cache eligibility and previewability.

    Raises:
        ScriptError: the script is invalid; the message names the path. An unexpected
            exception inside validation is logged with its traceback and reported as a
            :class:`ScriptError` too (:data:`INTERNAL_ERROR`), so no internal exception
            text reaches the user.
        NotPreviewableError: ``preview`` and a step other than moveto/end_effector.
    """
    parse = parser if parser is not None else ScriptParser.default()
    try:
        script = parse(text)
    except ScriptError:
        raise
    except Exception:
        import logging  # here: `validate` imports no logging otherwise

        logging.getLogger(__name__).exception("internal error while validating a script")
        raise ScriptError("", INTERNAL_ERROR) from None
    plan = plan_script(script, enable_batching=enable_batching)
    if preview:
        plan.check_previewable()
    return plan


def plan_script(script: Script, *, enable_batching: bool = True) -> GoalPlan:
    """The goal plan of an already-parsed script (the second half of :func:`plan_goal`).

    Args:
        script: a script from the configured parser.
        enable_batching: the ``enable_batching`` parameter.
    """
    units = tuple(group_into_batches(script.steps, enabled=enable_batching))
    return GoalPlan(
        script=script,
        units=units,
        enable_batching=enable_batching,
        eligible=is_eligible(units),
        preview_error=preview_problem(script),
    )
