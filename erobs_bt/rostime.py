"""Seconds and ROS time messages (``builtin_interfaces/Duration`` and ``Time``), in one place.

Below the backends and ``erobs_bt.ros`` (pyproject.toml, the import contracts "layers" and
"rclpy"), so the ROS-side drivers, the node's conversions (:mod:`erobs_bt.ros.convert`) and
the simulated ROS nodes share one rule: a time in seconds is rounded to the nanosecond, and
``nanosec`` is always in ``[0, 10⁹)``.
"""

from __future__ import annotations

from builtin_interfaces.msg import Duration, Time

_NANO = 1_000_000_000


def duration_msg(seconds: float) -> Duration:
    """``builtin_interfaces/Duration`` of ``seconds``, rounded to the nanosecond; a negative
    value (a rounding error of a time that is never negative) gives zero."""
    total = round(max(0.0, seconds) * _NANO)
    return Duration(sec=total // _NANO, nanosec=total % _NANO)


def time_msg(epoch_seconds: float) -> Time:
    """``builtin_interfaces/Time`` of a wall time [s since the epoch], rounded to the nanosecond."""
    total = round(epoch_seconds * _NANO)
    return Time(sec=total // _NANO, nanosec=total % _NANO)


def seconds(value: Duration | Time) -> float:
    """A ``Duration`` or ``Time`` in seconds."""
    return value.sec + value.nanosec / _NANO
