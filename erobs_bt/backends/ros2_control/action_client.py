"""rclpy's ``ActionClient``, safe to use from a thread other than the one that spins its node.

Every action client of erobs_bt (the ROS-side drivers, the node's client, the test doubles'
observers) is made from :class:`ActionClient` here. The reason is Jazzy's rclpy (7.x, branch
``jazzy`` @ 85415f7, ``rclpy/action/client.py``): ``send_goal_async`` (440-452),
``_cancel_goal_async`` (498-504) and ``_get_result_async`` (550-556) send the request and only
then file the future that its answer completes, while the executor's thread handles answers in
``execute`` (280-326) without a lock. An answer taken in between is dropped ("Ignoring unexpected
goal response", 305) and its future never completes: an accepted goal looks unanswered while the
arm moves, a result never arrives. Kilted's rclpy (9.x) files the future under a lock that
``execute`` takes too (ros2/rclpy#1123); this class does the same on both distros, with a lock
of its own, so it changes nothing on Kilted.
"""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient as _RclpyActionClient

#: The keys of ``execute``'s taken data that answer a request (the others are feedback and status).
_ANSWERS = ("goal", "cancel", "result")


class ActionClient(_RclpyActionClient):  # type: ignore[misc]
    """``rclpy.action.ActionClient`` whose requests and their answers are matched under one lock.

    Same constructor and methods as rclpy's. The lock is held while a request is sent and its
    future filed, and while the executor's thread hands the answers of a ready wait set to their
    futures; feedback and status callbacks run outside it (they may send requests themselves).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Before rclpy's __init__: it adds the client to the node's waitables, and an executor
        # spinning meanwhile may already use it. Kilted's rclpy assigns its own ``_lock`` only
        # after that (client.py __init__), and an executor that builds its wait set in between
        # fails on the missing attribute and its spin thread ends; so ``_lock`` exists from the
        # start too (rclpy then replaces it; Jazzy's has none and ignores it).
        self._requests_lock = threading.RLock()
        self._lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def send_goal_async(self, *args: Any, **kwargs: Any) -> Any:
        with self._requests_lock:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, *args: Any, **kwargs: Any) -> Any:
        with self._requests_lock:
            return super()._cancel_goal_async(*args, **kwargs)

    def _get_result_async(self, *args: Any, **kwargs: Any) -> Any:
        with self._requests_lock:
            return super()._get_result_async(*args, **kwargs)

    async def execute(self, taken_data: Any) -> None:
        """Hand the answers in ``taken_data`` to their futures under the lock, then run the
        feedback and status part as rclpy does."""
        answers = {key: taken_data.pop(key) for key in _ANSWERS if key in taken_data}
        if answers:
            with self._requests_lock:
                # rclpy's answer branches complete futures and never suspend, so the
                # coroutine runs to its end here, inside the lock.
                await super().execute(answers)  # type: ignore[arg-type]
        if taken_data:
            await super().execute(taken_data)
