#!/usr/bin/env bash
# The environment for erobs_bt's ROS processes (tests, CI, `make run`, benchmarks).
#
#   scripts/env.sh COMMAND [ARGS...]   run COMMAND in that environment; its exit status is kept
#   source scripts/env.sh               export the same variables into the current shell
#
# What it sets, and why (docs/ros2-from-pypi.md §3, docs/design.md §4 "Safe by default"):
#   ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST  unless already set: Fast DDS otherwise multicasts
#                                  out of every interface. (Kilted ignores ROS_LOCALHOST_ONLY.)
#   FASTDDS_DEFAULT_PROFILES_FILE  config/fastdds_localhost.xml: discovery in ~0.15 s, not ~3 s.
#   ROS_LOG_DIR                    a fresh temporary directory, so ~/.ros/log does not fill up;
#                                  removed after a successful COMMAND, kept (and named) otherwise.
#   AMENT_PREFIX_PATH              the venv, unless already set (ament_index_python needs it).
#   PATH                           the venv's bin/ first.
#   unset RMW_IMPLEMENTATION       only rmw_fastrtps_cpp exists as a wheel; any other value makes
#                                  `import rclpy` exit with status 102.
#   unset ROS_LOCALHOST_ONLY       no longer read by Kilted; unset so nobody relies on it.
# ROS_DOMAIN_ID is not set here: test fixtures choose a private one per test session/worker.

_erobs_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_erobs_venv="${EROBS_VENV:-${_erobs_root}/.venv}"

export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export FASTDDS_DEFAULT_PROFILES_FILE="${_erobs_root}/config/fastdds_localhost.xml"
export AMENT_PREFIX_PATH="${AMENT_PREFIX_PATH:-${_erobs_venv}}"
export PATH="${_erobs_venv}/bin:${PATH}"
unset RMW_IMPLEMENTATION ROS_LOCALHOST_ONLY
ROS_LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/erobs_bt-ros-log.XXXXXX")"
export ROS_LOG_DIR

if [[ -n "${ROS_DISTRO:-}" ]]; then
  echo "env.sh: warning: ROS_DISTRO=${ROS_DISTRO} is set (a ROS installation was sourced);" \
       "its PYTHONPATH/LD_LIBRARY_PATH can shadow the venv's ROS wheels" >&2
fi

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
  # Sourced: leave the variables in the caller's shell.
  unset _erobs_root _erobs_venv
  return 0
fi

if [[ $# -eq 0 ]]; then
  echo "usage: scripts/env.sh COMMAND [ARGS...]   (or: source scripts/env.sh)" >&2
  rmdir "${ROS_LOG_DIR}"
  exit 2
fi

# Run the command as a child (so the log directory can be cleaned up afterwards) and pass
# SIGINT/SIGTERM on to it: stopping this script by its PID stops the command cleanly.
status=0
"$@" <&0 &   # explicit stdin: a background job would otherwise read /dev/null
child=$!
trap 'kill -INT "${child}" 2>/dev/null' INT
trap 'kill -TERM "${child}" 2>/dev/null' TERM
while true; do
  wait "${child}" && status=0 || status=$?
  # wait returns early (status > 128) when a trapped signal arrives; keep waiting for the child.
  kill -0 "${child}" 2>/dev/null || break
done
trap - INT TERM
if [[ ${status} -eq 0 ]]; then
  rm -rf -- "${ROS_LOG_DIR}"
elif [[ -n "$(ls -A "${ROS_LOG_DIR}" 2>/dev/null)" ]]; then
  echo "env.sh: '$1' exited with status ${status}; ROS logs kept in ${ROS_LOG_DIR}" >&2
else
  rmdir "${ROS_LOG_DIR}" 2>/dev/null || true
fi
exit "${status}"
