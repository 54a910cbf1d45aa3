"""A run's ROS 2 bag as a file: where it lies beside its run log, how to tell it from one,
what opens it, and its topics. Read with the ``mcap`` library alone (no message is decoded,
nothing of ROS is imported), so ``erobs-bt log`` shows a bag on any machine.

The bag is written by :class:`erobs_bt.ros.record.mcap_record.McapRecorder`; its messages are read
back by :func:`erobs_bt.ros.record.mcap_record.read_recording`.
"""

from __future__ import annotations

from pathlib import Path

#: Nanoseconds per second (MCAP log times are in ns).
_NANO = 1_000_000_000


def mcap_path_for(log_path: Path) -> Path:
    """The MCAP file beside a run log: same name, suffix ``.mcap``."""
    return log_path.with_suffix(".mcap")


def run_log_for(bag_path: Path) -> Path:
    """The run log beside a bag (the inverse of :func:`mcap_path_for`): suffix ``.jsonl``."""
    return bag_path.with_suffix(".jsonl")


#: The first bytes of every MCAP file (the MCAP specification's magic, version 0).
MCAP_MAGIC = b"\x89MCAP0\r\n"


def is_mcap(path: str | Path) -> bool:
    """True when the file starts with :data:`MCAP_MAGIC` (a bag, not a run log).

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as stream:
        return stream.read(len(MCAP_MAGIC)) == MCAP_MAGIC


def how_to_open(path: str | Path) -> str:
    """What opens the bag at ``path``: Foxglove and ``erobs-bt log`` always, ``ros2 bag
    play`` where a ROS 2 installation provides the ``ros2`` command (the PyPI wheels
    erobs_bt runs on do not)."""
    import shutil

    ros2 = (
        f"ros2 bag play {path}"
        if shutil.which("ros2")
        else "ros2 bag play where ROS 2 is installed (not on this machine)"
    )
    return f"open it with Foxglove, erobs-bt log {path}, or {ros2}"


def bag_summary(path: str | Path) -> tuple[list[tuple[str, str, int]], float | None]:
    """The topics of a bag and its duration, from the MCAP summary (no message is decoded).

    A bag whose summary was never written (the process died while recording) is read to
    its last complete message instead.

    Returns:
        ``([(topic, message type, message count), ...] in topic order, duration [s] or
        None when it has no message)``.

    Raises:
        OSError: the file cannot be read.
        mcap.exceptions.McapError: it is not a valid MCAP file.
    """
    from mcap.reader import make_reader

    with open(path, "rb") as stream:
        reader = make_reader(stream)
        summary = reader.get_summary()
        if summary is not None and summary.statistics is not None:
            counts = summary.statistics.channel_message_counts
            start, end = summary.statistics.message_start_time, summary.statistics.message_end_time
            has_messages = summary.statistics.message_count > 0
            channels = summary.channels
            schemas = summary.schemas
        else:
            counts, channels, schemas = {}, {}, {}
            start = end = 0
            has_messages = False
            stream.seek(0)
            for schema, channel, message in make_reader(stream).iter_messages():
                counts[channel.id] = counts.get(channel.id, 0) + 1
                channels[channel.id] = channel
                if schema is not None:
                    schemas[schema.id] = schema
                start = message.log_time if not has_messages else min(start, message.log_time)
                end = max(end, message.log_time)
                has_messages = True
    rows = sorted(
        (
            channel.topic,
            schemas[channel.schema_id].name if channel.schema_id in schemas else "?",
            counts.get(channel.id, 0),
        )
        for channel in channels.values()
    )
    return rows, ((end - start) / _NANO if has_messages else None)
