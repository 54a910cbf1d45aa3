"""Which ROS 2 distro this process runs, and the few things that differ between the two erobs_bt
supports: Jazzy (the distro of EROBS's cell, and the default) and Kilted.

The distro is read from the installed ``rclpy`` distribution (the PyPI wheels and a sourced
``/opt/ros/<distro>`` both install its metadata), so nothing is imported: this module is cheap
and needs no ROS. The release series are those of ros2/rclpy's branches: ``jazzy`` 7.x,
``kilted`` 9.x.

What differs, in one place:

* the Fast DDS release under ``rmw_fastrtps_cpp``: 2.14 on Jazzy, 3.2 on Kilted. Fast DDS 2
  reads its XML profile from ``FASTRTPS_DEFAULT_PROFILES_FILE`` only; Fast DDS 3 reads
  ``FASTDDS_DEFAULT_PROFILES_FILE`` (and warns that the old name is deprecated), see
  :func:`profiles_variable`;
* the names of its shared-memory files under ``/dev/shm``: ``fastrtps_*`` (2.x) or
  ``fastdds_*`` (3.x), see :data:`SHM_PREFIXES`;
* control_msgs' FollowJointTrajectory: its Feedback has ``index`` and ``multi_dof_index`` on
  Kilted only (interfaces/control_msgs builds the distro's layout).
"""

from __future__ import annotations

import importlib.metadata
import os

#: The ROS 2 distros erobs_bt is set up for (requirements-ros-<distro>.txt); the first is the default.
DISTROS = ("jazzy", "kilted")

#: rclpy's major version on each distro (ros2/rclpy branches ``jazzy``: 7.x, ``kilted``: 9.x).
RCLPY_MAJOR = {7: "jazzy", 9: "kilted"}

#: The XML-profile variable of the Fast DDS release each distro ships (2.14 on Jazzy, 3.2 on Kilted).
PROFILES_VARIABLES = {"jazzy": "FASTRTPS_DEFAULT_PROFILES_FILE", "kilted": "FASTDDS_DEFAULT_PROFILES_FILE"}

#: The prefixes of Fast DDS's shared-memory files in ``/dev/shm`` (its SHM domain name): ``fastrtps``
#: on Fast DDS 2 (Jazzy), ``fastdds`` on Fast DDS 3 (Kilted).
SHM_PREFIXES = {"jazzy": "fastrtps", "kilted": "fastdds"}


class UnknownRosDistro(RuntimeError):
    """rclpy is missing, or of a release series that is neither Jazzy's nor Kilted's."""


def ros_distro() -> str:
    """The ROS 2 distro of the rclpy this interpreter would import: ``"jazzy"`` or ``"kilted"``.

    From the major version of the installed ``rclpy`` distribution (see :data:`RCLPY_MAJOR`);
    where none is installed, ``ROS_DISTRO`` (a sourced distribution sets it).

    Raises:
        UnknownRosDistro: neither gives one of :data:`DISTROS`.
    """
    try:
        version = importlib.metadata.version("rclpy")
    except importlib.metadata.PackageNotFoundError:
        named = os.environ.get("ROS_DISTRO", "")
        if named in DISTROS:
            return named
        raise UnknownRosDistro(f"rclpy is not installed and ROS_DISTRO is {named!r}") from None
    major = int(version.split(".", 1)[0])
    if major not in RCLPY_MAJOR:
        raise UnknownRosDistro(f"rclpy {version} is of no distro erobs_bt supports ({', '.join(DISTROS)})")
    return RCLPY_MAJOR[major]


def profiles_variable(distro: str | None = None) -> str:
    """The environment variable through which ``distro``'s Fast DDS loads an XML profile.

    Args:
        distro: ``"jazzy"`` or ``"kilted"``; ``None``: :func:`ros_distro`.

    Raises:
        UnknownRosDistro: ``distro`` is None and :func:`ros_distro` finds none.
        KeyError: ``distro`` is not one of :data:`DISTROS`.
    """
    return PROFILES_VARIABLES[distro or ros_distro()]
