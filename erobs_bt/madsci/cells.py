"""The cell a MADSci node serves: an erobs_bt ROS node by name, or an engine in this process.

Both kinds answer the same questions and take the same commands, with the engine's own
semantics (docs/behaviour.md §3):

* :meth:`Cell.view` — the cell's latest :class:`CellView` (state, goal, unit, gripper,
  whether it is reachable and, when not, why);
* :meth:`Cell.run` — run (or preview) one script and block until it ends, returning its
  :class:`Outcome` (what the engine reported: status, error code and message with its step
  path, completed/total steps, the last cache status, the goal's run log and bag);
* :meth:`Cell.parser` — the parser and batching the cell's engine makes its goals with, so
  that ``validate`` accepts exactly what ``run`` accepts: the embedded engine's own; for a ROS
  node, the files its parameters name (``cell_config``, ``poses_file``, ``enable_batching``,
  asked of the node), decided as the node decides them;
* :meth:`Cell.pause`, :meth:`Cell.resume`, :meth:`Cell.cancel` (all at the next unit
  boundary), :meth:`Cell.stop` (stop now: the arm decelerates to rest and the goal aborts
  ``STOPPED``), :meth:`Cell.reset_fault`, :meth:`Cell.clear_cache` — each answers
  ``(accepted, the engine's message)``.

A goal is refused by the engine itself (busy, FAULTED), never second-guessed here: the
refusal comes back as an :class:`Outcome` with status ``REJECTED`` and the engine's reason.

:class:`RosCell` is the MADSci twin of :class:`erobs_bt.bluesky.ErobsRobot`: one
:class:`~erobs_bt.ros.client.client.ErobsBtClient`, made once and reused for every goal and
command; it watches the node's latched ``~/execution_state`` publisher, so a node that goes
away makes the cell unreachable (a running goal ends ``NODE_LOST``) and a node that comes
back (restarted, rediscovered) makes it reachable again, with no new client.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from erobs_bt.goal import Feedback, OrchestratorListener, Result, State, unchecked_replay_in

if TYPE_CHECKING:
    from erobs_bt.plan import ScriptParser

_LOG = logging.getLogger(__name__)

#: [s] default wait for the ROS node to be discovered and to answer one request.
DEFAULT_TIMEOUT = 10.0
#: [s] longest wait, after a goal's result, for its bag to be closed by the node's writer
#: thread (it closes the bag after the goal's final tree snapshot, a moment after the result).
BAG_CLOSE_WAIT = 10.0
#: The last bytes of a complete MCAP file (the format's magic, repeated after the footer).
MCAP_MAGIC = b"\x89MCAP0\r\n"

#: The engine states in which a goal holds the cell (docs/behaviour.md §3).
BUSY_STATES = frozenset({"RUNNING", "COMPLETING_TASK", "PAUSED", "CANCELING"})


@dataclass(frozen=True)
class CellView:
    """What is known of a cell at one moment.

    Attributes:
        cell: the cell's name: the ROS node's fully qualified name, or ``embedded``.
        reachable: the engine answers (always true for an embedded engine).
        reason: why it is not reachable (``""`` when it is).
        state: the engine's state (``IDLE``, ``RUNNING``, ``COMPLETING_TASK``, ``PAUSED``,
            ``CANCELING``, ``FAULTED``), or ``UNKNOWN`` before any was heard.
        message: the engine's message with that state (the fault reason when FAULTED).
        goal_id: the engine's id of the current (or last) goal, ``""`` when none.
        unit_index: 1-based index of the running unit (0 when none).
        current_step: 1-based index of the first step of the running unit (0 when none).
        total_steps: steps of the current goal after macro expansion.
        gripper: the attached gripper (``""`` before it was heard).
    """

    cell: str
    reachable: bool
    reason: str
    state: str
    message: str
    goal_id: str
    unit_index: int
    current_step: int
    total_steps: int
    gripper: str

    @property
    def busy(self) -> bool:
        """A goal holds the cell (running, finishing a unit, paused or cancelling)."""
        return self.state in BUSY_STATES

    @property
    def faulted(self) -> bool:
        return self.state == "FAULTED"


@dataclass(frozen=True)
class Outcome:
    """The end of one goal, as the engine reported it.

    Attributes:
        status: ``SUCCEEDED``, ``ABORTED``, ``CANCELED`` (the engine's), ``REJECTED`` (refused:
            busy or FAULTED), ``UNREACHABLE`` (the ROS node did not answer the goal request),
            ``NODE_LOST`` (the ROS node went away during the goal).
        error_code: ``""`` on success; the engine's code (``INVALID_SCRIPT``, ``STOPPED``,
            ``CANCELED``, ``PLANNING_FAILED``, …) or ``REJECTED``/``UNREACHABLE``/``NODE_LOST``.
        error_message: the engine's error with its prefix or step path (``tasks[3].target: …``),
            the refusal reason, or what to check.
        completed_steps: steps of the units that completed.
        total_steps: steps after macro expansion (0 when the script did not parse).
        goal_id: the engine's goal id (``""`` when refused or unknown).
        dry_run: the goal was a preview.
        cache_status: the last plan-cache outcome reported (``HIT``, ``MISS``, ``INELIGIBLE``,
            ``""`` when no motion unit ran).
        gripper: the attached gripper after the goal.
        run_log: the goal's JSON Lines run log, when it can be read here.
        bag: the goal's ROS 2 bag (MCAP), when it can be read here.
        notices: what the goal did that an operator must know although it did not fail, in
            order: ``unit N: replayed unchecked: …`` for each cache hit replayed without a
            scene check although planned in another planning-scene revision
            (:func:`erobs_bt.goal.unchecked_replay_notice`).
    """

    status: str
    error_code: str
    error_message: str
    completed_steps: int
    total_steps: int
    goal_id: str = ""
    dry_run: bool = False
    cache_status: str = ""
    gripper: str = ""
    run_log: Path | None = None
    bag: Path | None = None
    notices: tuple[str, ...] = ()

    @property
    def success(self) -> bool:
        return self.status == "SUCCEEDED"


Listener = Callable[[CellView], None]


class Cell:
    """The interface both kinds of cell implement (see the module docstring).

    Listeners added with :meth:`add_listener` are called with the new view on every state
    change and unit start, on the thread that saw it; they must not block.
    """

    name: str

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(view)`` on every change of :meth:`view`."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        view = self.view()
        for listener in list(self._listeners):
            try:
                listener(view)
            except Exception:  # a listener's bug must not stop the cell's updates
                _LOG.exception("cell listener failed")

    def view(self) -> CellView:
        """The cell's latest :class:`CellView` (does not block on the engine)."""
        raise NotImplementedError

    def run(self, full_json: str, *, dry_run: bool = False) -> Outcome:
        """Run (``dry_run``: preview) one script and block until it ends."""
        raise NotImplementedError

    def parser(self) -> tuple[ScriptParser, bool]:
        """The parser the cell's engine parses goals with and its ``enable_batching``.

        Raises:
            TimeoutError: the ROS node did not answer.
            erobs_bt.commandline.ConfigurationError: the node's cell or registry cannot be
                read here, or is invalid.
        """
        raise NotImplementedError

    def pause(self) -> tuple[bool, str]:
        """Pause the running goal at its next unit boundary: ``(accepted, the engine's message)``."""
        raise NotImplementedError

    def resume(self) -> tuple[bool, str]:
        """Resume a goal paused at a boundary (refused otherwise)."""
        raise NotImplementedError

    def cancel(self) -> tuple[bool, str]:
        """Cancel the running goal: it ends CANCELED at the next unit boundary (at once while paused)."""
        raise NotImplementedError

    def stop(self) -> tuple[bool, str]:
        """Stop now: the arm decelerates to rest and the goal aborts ``STOPPED``."""
        raise NotImplementedError

    def reset_fault(self) -> tuple[bool, str]:
        """Clear FAULTED (refused when not faulted)."""
        raise NotImplementedError

    def clear_cache(self) -> tuple[bool, str]:
        """Drop the cell's cached plans."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the cell holds (the ROS client; the embedded engine, halting its goal)."""


def _bag_when_closed(path: Path, timeout: float) -> Path | None:
    """``path`` once it ends with the MCAP magic (its writer closed it), else ``None``.

    The node's run-log writer thread closes a goal's bag just after the goal's result, so
    this waits for the file, checking its last bytes every 50 ms, for at most ``timeout`` [s].
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            with path.open("rb") as handle:
                handle.seek(max(0, path.stat().st_size - len(MCAP_MAGIC)))
                if handle.read() == MCAP_MAGIC:
                    return path
        except OSError:
            pass
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


# -- a cell behind an erobs_bt ROS node ------------------------------------------------------
@dataclass
class _Track:
    """What :class:`RosCell` follows of one goal it sent."""

    cache_status: str = ""
    unit: tuple[int, int, int] | None = None  # (unit_index, current_step, total_steps) of its feedback
    notices: list[str] = field(default_factory=list)  # Outcome.notices, from the feedback


class RosCell(Cell):
    """A cell served by an erobs_bt ROS node, reached by the node's name.

    Args:
        node: the node's fully qualified name (``/cell1/erobs_bt``).
        domain_id: the ROS domain; ``None`` reads ``ROS_DOMAIN_ID`` once, now.
        timeout: [s] for discovery and for each request to the node.
        run_log_dir: the node's ``run_log_dir`` when it can be read from here (same machine
            or a shared folder): each outcome then carries the goal's run log and bag.
            ``None``: no files.
        client_name: this client's ROS node name.
    """

    def __init__(
        self,
        node: str,
        *,
        domain_id: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        run_log_dir: Path | None = None,
        client_name: str | None = None,
    ) -> None:
        super().__init__()
        from erobs_bt.ros.client.client import ErobsBtClient

        self.name = "/" + node.strip("/")
        self.timeout = timeout
        self.run_log_dir = run_log_dir
        self._client = ErobsBtClient(self.name, client_name=client_name, domain_id=domain_id)
        self._lock = threading.Condition()
        self._present = False
        self._ever_seen = False
        self._losses = 0  # how often the node went away (a running goal compares it)
        self._active: _Track | None = None  # the goal whose feedback the view follows
        # Parsers made for the node's (cell_config, poses_file): the node reads its files once.
        self._parsers: dict[tuple[str, str], ScriptParser] = {}
        # Presence: the node's latched state publisher matched or unmatched (as ErobsRobot does).
        self._client.follow_presence(self._on_matched, on_state=lambda _message: self._changed())

    # -- what the node reports (client spin thread) --------------------------------------
    def _on_matched(self, count: int) -> None:
        with self._lock:
            present = count > 0
            if self._present and not present:
                self._losses += 1
            self._present = present
            self._ever_seen = self._ever_seen or present
            self._lock.notify_all()
        _LOG.info("%s %s", self.name, "discovered" if present else "went away")
        self._changed()

    def _on_feedback(self, track: _Track, feedback: Any) -> None:
        # A unit's notice stays in its feedback until it ends (the node thins feedback).
        unchecked = unchecked_replay_in(str(feedback.status_message))
        with self._lock:
            if feedback.cache_status:
                track.cache_status = str(feedback.cache_status)
            if unchecked:
                notice = f"unit {int(feedback.unit_index)}: {unchecked}"
                if notice not in track.notices:
                    track.notices.append(notice)
            unit = (int(feedback.unit_index), int(feedback.current_step), int(feedback.total_steps))
            changed = unit != track.unit and track is self._active  # not a late one of an earlier goal
            track.unit = unit
        if changed:
            self._changed()

    def view(self) -> CellView:
        latest = self._client.states.latest()
        gripper = self._client.grippers.latest() or ""
        with self._lock:
            present, seen = self._present, self._ever_seen
            # While a goal this cell sent runs, its feedback has the running unit (the state
            # message has it only as of the last state change).
            unit = self._active.unit if self._active is not None else None
        reason = ""
        if not present:
            domain = self._client.domain_id
            scope = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
            reason = (
                f"erobs_bt node {self.name} {'went away' if seen else 'is not reachable'}: is it "
                f"running, under this name, in ROS_DOMAIN_ID={domain} with discovery range {scope}?"
            )
        if latest is None:
            return CellView(self.name, present, reason, "UNKNOWN", "", "", 0, 0, 0, gripper)
        if unit is None or latest.state not in BUSY_STATES:
            unit = (int(latest.unit_index), int(latest.current_step), int(latest.total_steps))
        return CellView(
            self.name,
            present,
            reason,
            str(latest.state),
            str(latest.message),
            str(latest.goal_id),
            *unit,
            gripper,
        )

    def wait_reachable(self, timeout: float) -> bool:
        """Block until the node's action server and services are discovered (``timeout`` [s])."""
        return self._client.wait_for_server(timeout)

    # -- goals -------------------------------------------------------------------------------
    def run(self, full_json: str, *, dry_run: bool = False) -> Outcome:
        """Send the script as a goal of ``<node>/execute`` and wait for its result.

        Returns:
            The outcome; ``UNREACHABLE`` when the node did not answer the goal request within
            the timeout, ``NODE_LOST`` when it went away before the result.
        """
        states = self._client.states
        since = states.count
        track = _Track()
        with self._lock:
            previous, self._active = self._active, track
            losses = self._losses
        try:
            run = self._client.send(
                full_json,
                dry_run=dry_run,
                on_feedback=lambda feedback: self._on_feedback(track, feedback),
                timeout=self.timeout,
            )
        except TimeoutError as exc:
            self._unfollow(track, previous)
            return Outcome("UNREACHABLE", "UNREACHABLE", f"{self.name}: {exc}", 0, 0, dry_run=dry_run)
        if not run.accepted:
            self._unfollow(track, previous)
            return Outcome("REJECTED", "REJECTED", run.rejection, 0, 0, dry_run=dry_run)
        with self._lock:
            while not run.done() and self._losses == losses:
                self._lock.wait(0.1)  # the result completes a future, not this condition
            lost = not run.done()
            cache_status = track.cache_status
            notices = tuple(track.notices)
        if lost:
            return Outcome(
                "NODE_LOST",
                "NODE_LOST",
                f"erobs_bt node {self.name} went away during the goal; the robot's state is unknown: "
                "check the cell before the next script",
                0,
                0,
                dry_run=dry_run,
                cache_status=cache_status,
            )
        result = run.wait()
        goal_id = self._goal_id(since)
        run_log, bag = self._files(goal_id)
        return Outcome(
            run.status_name,
            str(result.error_code),
            str(result.error_message),
            int(result.completed_steps),
            int(result.total_steps),
            goal_id=goal_id,
            dry_run=dry_run,
            cache_status=cache_status,
            gripper=self._client.grippers.latest() or "",
            run_log=run_log,
            bag=bag,
            notices=notices,
        )

    def parser(self) -> tuple[ScriptParser, bool]:
        """The node's parser, made here from the files its parameters name, as the node
        makes its own (:meth:`erobs_bt.ros.params.NodeSettings.script_files`); the node's
        ``enable_batching``. The files must be readable here (same host or shared folder)."""
        from erobs_bt.commandline import ConfigurationError, load_parser
        from erobs_bt.ros.params import NodeSettings
        from erobs_bt.world.cell import CellConfigError

        names = ["cell_config", "poses_file", "enable_batching"]
        try:
            settings = NodeSettings.from_values(self._client.get_parameters(names, self.timeout))
        except KeyError as exc:
            raise ConfigurationError(f"{self.name} is not an erobs_bt node: {exc.args[0]}") from None
        key = (settings.cell_config, settings.poses_file)
        with self._lock:
            parser = self._parsers.get(key)
        if parser is None:
            where = (
                f"the files of {self.name} (cell_config {settings.cell_config!r}, "
                f"poses_file {settings.poses_file!r}; '' = the default)"
            )
            try:
                cell, poses = settings.script_files()
                parser = load_parser(cell=cell, poses=poses)
            except (ConfigurationError, CellConfigError) as exc:
                raise ConfigurationError(f"{where} cannot be used here: {exc}") from None
            with self._lock:
                self._parsers[key] = parser
        return parser, settings.enable_batching

    def _unfollow(self, track: _Track, previous: _Track | None) -> None:
        """A goal that did not start: the view follows the goal that runs (if any) again."""
        with self._lock:
            if self._active is track:
                self._active = previous

    def _goal_id(self, since: int) -> str:
        """The goal id of the first state after ``since`` that names one: the goal's RUNNING,
        or (when a quick goal's RUNNING was superseded before it arrived) its final state."""
        message = self._client.states.wait_for(lambda m: bool(m.goal_id), self.timeout, since=since)
        return str(message.goal_id) if message is not None else ""

    def _files(self, goal_id: str) -> tuple[Path | None, Path | None]:
        """The goal's run log and bag in :attr:`run_log_dir` (``<UTC>_<goal id>_<script>.jsonl``
        and the ``.mcap`` beside it, erobs_bt.ros.node.runlogs), when both exist."""
        if self.run_log_dir is None or not goal_id:
            return None, None
        from erobs_bt.viz.bag import mcap_path_for

        logs = sorted(self.run_log_dir.glob(f"*_{goal_id}_*.jsonl"))
        if not logs:
            return None, None
        log = logs[-1]
        return log, _bag_when_closed(mcap_path_for(log), BAG_CLOSE_WAIT)

    # -- commands ---------------------------------------------------------------------------
    def _trigger(self, key: str) -> tuple[bool, str]:
        try:
            return self._client.trigger(key, self.timeout)
        except TimeoutError as exc:
            return False, f"{self.name}: {exc}"

    def pause(self) -> tuple[bool, str]:
        return self._trigger("pause")

    def resume(self) -> tuple[bool, str]:
        return self._trigger("resume")

    def stop(self) -> tuple[bool, str]:
        return self._trigger("stop")

    def reset_fault(self) -> tuple[bool, str]:
        return self._trigger("reset_fault")

    def clear_cache(self) -> tuple[bool, str]:
        return self._trigger("clear_cache")

    def cancel(self) -> tuple[bool, str]:
        """Cancel whatever goal the node runs (the action protocol's cancel-all request); the
        message is what the node said the cancel will do (``cancel accepted: the goal ends
        after unit 3 (its motion runs to its end); to halt now: stop …``,
        :meth:`~erobs_bt.ros.client.client.ErobsBtClient.cancel_all_said`)."""
        from erobs_bt.ros.client.client import CANCEL_CODES

        try:
            response, said = self._client.cancel_all_said(self.timeout)
        except TimeoutError as exc:
            return False, f"{self.name}: {exc}"
        goals = len(response.goals_canceling)
        code = CANCEL_CODES.get(response.return_code, str(response.return_code))
        if code == "ERROR_NONE" and goals:
            return True, said or f"cancel accepted for {goals} goal(s): it ends at the next unit boundary"
        return False, f"nothing to cancel ({code})"

    def close(self) -> None:
        self._client.close()


# -- an engine in this process ------------------------------------------------------------------
class _EngineListener(OrchestratorListener):
    """The embedded engine's state changes and feedback, for :class:`EmbeddedCell`."""

    def __init__(self, cell: EmbeddedCell) -> None:
        self.cell = cell

    def state_changed(self, state: State, message: str) -> None:
        """The cell's view takes the new state and its message."""
        self.cell._state_changed(state, message)

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        """The cell's view takes the running unit, step and gripper; the goal's cache status."""
        self.cell._feedback(goal_id, feedback)

    def finished(self, goal_id: str, result: Result) -> None:
        """The cell's view keeps the goal id and the gripper it ended with."""
        self.cell._finished(goal_id)

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        """The goal's notices (``replay_unchecked`` records)."""
        if record.get("event") == "replay_unchecked":
            self.cell._notice(goal_id, f"unit {record.get('unit')}: {record.get('message', '')}")


class EmbeddedCell(Cell):
    """A cell whose engine runs in this process (:func:`erobs_bt.session.build_engine`), as
    ``erobs-bt run`` builds it: the simulated UR5e by default.

    Args:
        config: the engine's configuration (:class:`erobs_bt.session.EngineConfig`).
        run_log_dir: where each goal's run log goes (as the ROS node writes it; no bag, see
            below); ``None``: no run logs.
    """

    def __init__(self, config: Any, *, run_log_dir: Path | None = None) -> None:
        super().__init__()
        from erobs_bt.session import build_engine

        self.name = "embedded"
        self._lock = threading.Lock()
        self._view = CellView(self.name, True, "", "IDLE", "", "", 0, 0, 0, "")
        self._cache_status = ""
        self._notices: dict[str, list[str]] = {}  # goal id → Outcome.notices
        self.engine = build_engine(config, listener=_EngineListener(self))
        self.run_logs = None
        if run_log_dir is not None:
            from erobs_bt.ros.node.runlogs import NodeRunLogs

            # No bag: NodeRunLogs closes a goal's bag after the ROS node's final tree snapshot,
            # which an engine without a node does not make.
            self.run_logs = NodeRunLogs(run_log_dir, on_error=_LOG.warning, mcap=False)
            self.engine.orchestrator.listener.add(self.run_logs)
            self.run_logs.attach(self.engine.backend)
        with self._lock:
            self._view = replace(self._view, gripper=self.engine.backend.current_gripper())

    def _state_changed(self, state: State, message: str) -> None:
        goal = self.engine.orchestrator.active_goal if hasattr(self, "engine") else None
        with self._lock:
            self._view = replace(
                self._view,
                state=state.value,
                message=message,
                goal_id=goal.goal_id if goal is not None else self._view.goal_id,
            )
            if state is State.IDLE:
                self._view = replace(self._view, unit_index=0, current_step=0)
        self._changed()

    def _feedback(self, goal_id: str, feedback: Feedback) -> None:
        with self._lock:
            if feedback.cache_status:
                self._cache_status = feedback.cache_status
            changed = feedback.unit_index != self._view.unit_index
            self._view = replace(
                self._view,
                goal_id=goal_id,
                unit_index=feedback.unit_index,
                current_step=feedback.current_step,
                total_steps=feedback.total_steps,
                gripper=feedback.current_gripper or self._view.gripper,
            )
        if changed:
            self._changed()

    def _notice(self, goal_id: str, notice: str) -> None:
        with self._lock:
            self._notices.setdefault(goal_id, []).append(notice)

    def _finished(self, goal_id: str) -> None:
        with self._lock:
            self._view = replace(self._view, goal_id=goal_id, gripper=self.engine.backend.current_gripper())

    def view(self) -> CellView:
        with self._lock:
            return self._view

    def parser(self) -> tuple[ScriptParser, bool]:
        """The engine's own parser and batching (:meth:`erobs_bt.session.Engine.plan`'s)."""
        from erobs_bt.plan import ScriptParser

        parser = self.engine.orchestrator.parser
        if not isinstance(parser, ScriptParser):  # an engine not made by build_engine
            config = self.engine.config
            parser = ScriptParser.from_files(cell=config.cell, poses=config.poses)
        return parser, self.engine.orchestrator.settings.enable_batching

    def run(self, full_json: str, *, dry_run: bool = False) -> Outcome:
        from erobs_bt.goal import GoalRejected

        with self._lock:
            self._cache_status = ""
        if self.run_logs is not None:
            self.run_logs.expect(full_json)
        try:
            handle = self.engine.orchestrator.submit(full_json, dry_run=dry_run)
        except GoalRejected as exc:
            return Outcome("REJECTED", "REJECTED", str(exc), 0, 0, dry_run=dry_run)
        result = handle.wait()
        run_log = self.run_logs.path_of(handle.goal_id) if self.run_logs is not None else None
        with self._lock:
            cache_status = self._cache_status
            notices = tuple(self._notices.pop(handle.goal_id, ()))
        return Outcome(
            result.status.value,
            result.error_code,
            result.error_message,
            result.completed_steps,
            result.total_steps,
            goal_id=handle.goal_id,
            dry_run=dry_run,
            cache_status=cache_status,
            gripper=self.engine.backend.current_gripper(),
            run_log=run_log,
            notices=notices,
        )

    def _reply(self, method: str) -> tuple[bool, str]:
        reply = getattr(self.engine.orchestrator, method)()
        return bool(reply.success), str(reply.message)

    def pause(self) -> tuple[bool, str]:
        return self._reply("pause")

    def resume(self) -> tuple[bool, str]:
        return self._reply("resume")

    def cancel(self) -> tuple[bool, str]:
        return self._reply("cancel")

    def stop(self) -> tuple[bool, str]:
        return self._reply("stop")

    def reset_fault(self) -> tuple[bool, str]:
        return self._reply("reset_fault")

    def clear_cache(self) -> tuple[bool, str]:
        return self._reply("clear_cache")

    def close(self) -> None:
        self.engine.close()
        if self.run_logs is not None:
            self.run_logs.close()
