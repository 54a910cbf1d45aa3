"""A run's MCAP bag opened once the arm first moves, with everything that came before it.

Opening a :class:`~erobs_bt.ros.record.mcap_record.McapRecorder` costs about 0.2–0.3 s of CPU
(``rclpy``, ``mcap``, the message definitions and their encoders), which ``erobs-bt run``
would otherwise pay between the user's Enter and the first motion. :class:`DeferredRecorder`
takes the recorder's place from the start: until the first ``execute_started`` or
``replay_started`` record it only keeps each callback with the wall time it arrived (a
tuple, microseconds), then opens the recorder on a thread of its own and hands it what was
kept, with those times (the recorder's ``received`` arguments), so the bag holds the same
messages at the same log times as a recorder opened at the start. Tree snapshots are the
exception: the recorder takes them from the live tree at most ``snapshot_rate`` times a
second, so the first one is taken when the recorder opens (as it would be at its next
period). A goal that never moves (a preview, a goal refused or failed before its first
motion) has its bag opened when it finishes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from erobs_bt.goal import Feedback, OrchestratorListener, Result, State

if TYPE_CHECKING:
    import py_trees

    from erobs_bt.ros.record.mcap_record import McapRecorder

#: Run-log events at which the arm starts moving (a trajectory is handed to the controller).
MOTION_EVENTS = frozenset({"execute_started", "replay_started"})


class DeferredRecorder(OrchestratorListener):
    """An orchestrator listener that records to an MCAP bag opened at the first motion.

    Thread-safe like :class:`~erobs_bt.ros.record.mcap_record.McapRecorder`. Call :meth:`close` at
    the end (it opens the bag first if no motion came).

    Args:
        path: the ``.mcap`` file, or ``None`` for the one beside ``log_path``
            (:func:`~erobs_bt.viz.bag.mcap_path_for`, resolved when the bag opens).
        backend: the motion backend whose joint states are recorded.
        log_path: the run log the bag goes beside when ``path`` is ``None``.
        on_error: called with the reason (on the opening thread) when the bag cannot be
            opened; nothing is recorded then.
        rate: [Hz] joint states per wall second while moving (as ``McapRecorder.attach``).
    """

    def __init__(
        self,
        path: Path | None,
        backend: Any,
        *,
        log_path: Path | None = None,
        on_error: Callable[[str], None],
        rate: float = 50.0,
    ) -> None:
        if path is None and log_path is None:
            raise ValueError("DeferredRecorder: give the bag's path or the run log's")
        self._path = path
        self._log_path = log_path
        self._backend = backend
        self._on_error = on_error
        self._rate = rate
        self._lock = threading.Lock()
        self._held: list[tuple[float, str, tuple[Any, ...]]] = []  # (received [epoch s], method, args)
        self._recorder: McapRecorder | None = None
        self._live = False  # True once the held calls are handed over: calls go straight through
        self._failed = False
        self._opener: threading.Thread | None = None
        self._streams = bool(backend.add_joint_state_listener(self.joint_state, rate=rate))

    @property
    def path(self) -> Path:
        """The bag's file."""
        if self._path is None:
            from erobs_bt.viz.bag import mcap_path_for

            assert self._log_path is not None  # checked in __init__
            self._path = mcap_path_for(self._log_path)
        return self._path

    @property
    def recorder(self) -> McapRecorder | None:
        """The recorder once open (``None`` before, or when it could not be opened)."""
        return self._recorder

    # -- callbacks ------------------------------------------------------------------------
    def joint_state(
        self, names: Sequence[str], positions: Sequence[float], velocities: Sequence[float] | None
    ) -> None:
        """A joint state of the backend's stream (positions [rad], velocities [rad/s])."""
        self._call(
            "joint_state", (tuple(names), tuple(positions), None if velocities is None else tuple(velocities))
        )

    def state_changed(self, state: State, message: str) -> None:
        """Not recorded (the ``state`` run-log records are)."""

    def preview(self, goal_id: str, solution: Any) -> None:
        """Not recorded."""

    def event(self, goal_id: str, record: Mapping[str, Any]) -> None:
        """Keep or record ``record``; the first motion record opens the bag."""
        self._call("event", (goal_id, dict(record)))
        if record.get("event") in MOTION_EVENTS:
            self._open_in_background()

    def feedback(self, goal_id: str, feedback: Feedback) -> None:
        """Keep or record the feedback."""
        self._call("feedback", (goal_id, feedback))

    def ticked(self, goal_id: str, root: py_trees.behaviour.Behaviour) -> None:
        """Keep or pass on the tick (the recorder snapshots the live tree)."""
        self._call("ticked", (goal_id, root))

    def finished(self, goal_id: str, result: Result) -> None:
        """Keep or pass on the end of the goal; a goal that never moved opens the bag now."""
        self._call("finished", (goal_id, result))
        self._open_in_background()

    def close(self) -> McapRecorder | None:
        """Open the bag if it was not, write what is held, close it; the recorder (``None``
        when it could not be opened). Safe to call twice."""
        if self._streams:
            self._backend.remove_joint_state_listener(self.joint_state)
            self._streams = False
        self._open_in_background()
        opener = self._opener
        if opener is not None:
            opener.join()
        if self._recorder is not None:
            self._recorder.close()
        return self._recorder

    # -- internals ------------------------------------------------------------------------
    def _call(self, method: str, args: tuple[Any, ...]) -> None:
        with self._lock:
            if not self._live:
                if not self._failed:
                    self._held.append((time.time(), method, args))
                return
            recorder = self._recorder
        if recorder is not None:
            self._forward(recorder, method, args, None)

    @staticmethod
    def _forward(recorder: McapRecorder, method: str, args: tuple[Any, ...], received: float | None) -> None:
        if method in ("joint_state", "event", "feedback"):
            getattr(recorder, method)(*args, received=received)
        else:
            getattr(recorder, method)(*args)

    def _open_in_background(self) -> None:
        with self._lock:  # started under the lock: a close() on another thread never joins it unstarted
            if self._opener is not None:
                return
            self._opener = threading.Thread(target=self._open, name="mcap-open", daemon=True)
            self._opener.start()

    def _open(self) -> None:
        from erobs_bt.ros.record.mcap_record import McapRecorder

        try:
            recorder = McapRecorder(self.path)
        except (OSError, ValueError, ImportError) as exc:
            with self._lock:
                self._failed, self._live, self._held = True, True, []
            self._on_error(str(exc))
            return
        if not self._streams:
            recorder.attach(self._backend)  # no stream: the recorder polls the backend itself
        self._recorder = recorder
        while True:
            with self._lock:
                held, self._held = self._held, []
                if not held:
                    self._live = True  # nothing held any more: later calls go straight through
                    return
            for received, method, args in held:
                self._forward(recorder, method, args, received)
