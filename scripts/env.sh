#!/usr/bin/env bash
# The environment for erobs_bt's ROS processes (tests, CI, `make run`, benchmarks).
#
#   scripts/env.sh COMMAND [ARGS...]   run COMMAND in that environment; its exit status is kept
#   source scripts/env.sh               export the same variables into the current shell
#
# What it sets, and why (docs/ros2-from-pypi.md §3, docs/design.md §4 "Safe by default"):
#   ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST  unless already set: Fast DDS otherwise multicasts
#                                  out of every interface. (Jazzy deprecates ROS_LOCALHOST_ONLY,
#                                  Kilted ignores it.)
#   FASTRTPS_DEFAULT_PROFILES_FILE (Jazzy: Fast DDS 2.14) or FASTDDS_DEFAULT_PROFILES_FILE (Kilted:
#                                  Fast DDS 3; erobs_bt/rosdistro.py):
#                                  config/fastdds_localhost.xml: discovery in ~0.15 s, not ~3 s.
#   ROS_LOG_DIR                    a fresh temporary directory, so ~/.ros/log does not fill up;
#                                  removed after COMMAND unless it failed and the folder holds
#                                  something worth reading (a WARN/ERROR/FATAL line, or COMMAND
#                                  died of a signal): then it is kept and named.
#   AMENT_PREFIX_PATH              the venv, unless already set (ament_index_python needs it).
#   PATH                           the venv's bin/ first.
#   unset RMW_IMPLEMENTATION       only rmw_fastrtps_cpp exists as a wheel; any other value makes
#                                  `import rclpy` exit with status 102.
#   unset ROS_LOCALHOST_ONLY       deprecated (Jazzy), no longer read (Kilted); unset so nobody
#                                  relies on it.
# ROS_DOMAIN_ID is not set here: test fixtures choose a private one per test session/worker.
# The venv is EROBS_VENV, else .venv (ROS 2 Jazzy), or .venv-kilted with EROBS_ROS_DISTRO=kilted.

# Run as a command with SIGINT or SIGTERM ignored (bash ignores INT and QUIT for a background
# job of a non-interactive shell, `scripts/env.sh CMD &` in a script), the traps below would be
# silently void ("signals ignored upon entry cannot be trapped"): start again with both at their
# defaults, so `kill -INT <pid>` reaches COMMAND whatever the job control. Same PID (exec).
if [[ "${BASH_SOURCE[0]}" == "$0" && -r /proc/$$/status ]]; then
  _erobs_ignored="$(awk '/^SigIgn:/ {print $2}' "/proc/$$/status")"
  # bit 1 is SIGINT (2), bit 14 SIGTERM (15)
  if [[ -n "${_erobs_ignored}" ]] && (( (16#${_erobs_ignored} & 0x4002) != 0 )) &&
     env --default-signal=INT true 2>/dev/null; then
    exec env --default-signal=INT,TERM "${BASH:-bash}" "${BASH_SOURCE[0]}" "$@"
  fi
  unset _erobs_ignored
fi

_erobs_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The venv: EROBS_VENV, else the default one of EROBS_ROS_DISTRO (.venv for Jazzy, .venv-<distro>).
if [[ -n "${EROBS_VENV:-}" ]]; then
  _erobs_venv="${EROBS_VENV}"
elif [[ -n "${EROBS_ROS_DISTRO:-}" && "${EROBS_ROS_DISTRO}" != jazzy ]]; then
  _erobs_venv="${_erobs_root}/.venv-${EROBS_ROS_DISTRO}"
else
  _erobs_venv="${_erobs_root}/.venv"
fi

export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
# The venv's Fast DDS decides the name (the table is erobs_bt/rosdistro.py's PROFILES_VARIABLES):
# the 2.x library (Jazzy) is libfastrtps, the 3.x one (Kilted) libfastdds.
if compgen -G "${_erobs_venv}/lib/libfastrtps.so*" >/dev/null; then
  export FASTRTPS_DEFAULT_PROFILES_FILE="${_erobs_root}/config/fastdds_localhost.xml"
  unset FASTDDS_DEFAULT_PROFILES_FILE
else
  export FASTDDS_DEFAULT_PROFILES_FILE="${_erobs_root}/config/fastdds_localhost.xml"
  unset FASTRTPS_DEFAULT_PROFILES_FILE
fi
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
# The folder is thrown away unless the command failed and left something to read: a line at
# WARN, ERROR or FATAL in a ROS log file, or a death by signal (status > 128: a crash or a kill
# leaves INFO-only logs that still say how far it got). A refused verb (exit 1 or 2 with its
# reason printed) leaves only INFO lines, and no folder.
keep=false
if [[ ${status} -ne 0 ]]; then
  if [[ ${status} -gt 128 ]] ||
     grep -rqsE '^\[(WARN|ERROR|FATAL)\]' -- "${ROS_LOG_DIR}"; then
    keep=true
  fi
fi
if [[ "${keep}" == true ]]; then
  echo "env.sh: '$1' exited with status ${status}; ROS logs kept in ${ROS_LOG_DIR}" >&2
else
  rm -rf -- "${ROS_LOG_DIR}"
fi
exit "${status}"
