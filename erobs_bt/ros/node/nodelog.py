"""The node's log lines: every text through :func:`erobs_bt.ros.convert.ros_text` (the
logger encodes it as UTF-8), and cheap enough to log per goal.

rclpy's ``logger.info()`` finds its caller with ``inspect.getframeinfo``, which reads the
caller's source file: ~1.3 ms of the GIL per line, and the node logs two lines per goal
(accepted, finished), more than a goal of ten quick units takes in-process. :class:`NodeLog`
makes the same rcutils call with the caller's function, file and line read from the frame
(~20 µs); with an rclpy that lacks that call, the public logger is used.
"""

from __future__ import annotations

import sys

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy_impl
from rclpy.logging import LoggingSeverity
from rclpy.node import Node

from erobs_bt.ros import convert

__all__ = ["NodeLog"]


class NodeLog:
    """Logs through rcutils (console, log file, ``/rosout``) as ``node``'s logger.

    Args:
        node: the node whose logger (name, severity threshold) is used.
    """

    def __init__(self, node: Node) -> None:
        self._node = node

    def info(self, text: str) -> None:
        """Log ``text`` at INFO."""
        self._log(LoggingSeverity.INFO, text)

    def warning(self, text: str) -> None:
        """Log ``text`` at WARN."""
        self._log(LoggingSeverity.WARN, text)

    def error(self, text: str) -> None:
        """Log ``text`` at ERROR."""
        self._log(LoggingSeverity.ERROR, text)

    def _log(self, severity: LoggingSeverity, text: str) -> None:
        logger = self._node.get_logger()
        if not logger.is_enabled_for(severity):
            return
        message = convert.ros_text(text)
        log = getattr(_rclpy_impl, "rclpy_logging_rcutils_log", None)
        if log is None:
            logger.log(message, severity)
            return
        caller = sys._getframe(2)  # who called info, warning or error
        code = caller.f_code
        log(severity, logger.name, message, code.co_name, code.co_filename, caller.f_lineno)
