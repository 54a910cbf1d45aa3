#!/usr/bin/env bash
# One-command set-up of erobs_bt from a fresh clone (Debian 12, Python 3.11). Idempotent.
#
#   scripts/setup.sh          (or `make setup`)
#
# Steps, each skipped when already done:
#   1. system packages: graphviz (py_trees' dot/PNG/SVG rendering), redis-server (the queue of
#      the Bluesky queueserver; the tests start their own on a private 127.0.0.1 port and never
#      use a system service) and, only if missing, the compiler tool chain, cmake, Python
#      headers and venv support; `apt-get update` runs only when something has to be installed
#      (root, or password-less sudo).
#   2. .venv with python3 (3.11: the ROS wheels on PyPI are cp311 only). A venv that holds
#      another ROS 2 distro's rclpy than the lock of EROBS_ROS_DISTRO is made anew (pip would
#      leave the other distro's middleware libraries behind).
#   3. pip, then requirements.txt + requirements-ros-<distro>.txt + requirements-build.txt +
#      requirements-build-<distro>.txt + requirements-dev.txt + requirements-madsci.txt (the
#      ranges erobs_bt needs; the last is the `madsci` extra, the MADSci node, which the tests
#      drive) constrained by requirements-<distro>.lock (the exact version of every package,
#      transitive ones included), so every venv of a distro is the same.
#   4. the ROS interface packages under interfaces/ (erobs_bt_interfaces, and the subsets of
#      control_msgs, ur_msgs, py_trees_ros_interfaces, object_recognition_msgs, octomap_msgs and
#      moveit_msgs that no wheel provides, and beambot_interfaces and epick_msgs), in dependency order
#      (scripts/interface_packages.py): each built by CMake through scikit-build-core and
#      installed into the venv with `pip install --no-build-isolation` (recipe A of
#      docs/ros2-from-pypi.md; an isolated build cannot see ament_package). A package
#      that is already importable from elsewhere (a sourced ROS distribution) is not built.
#   5. erobs_bt itself: `pip install -e .` (setup.py), which puts `erobs-bt` and `erobs_bt_node`
#      in .venv/bin; then scripts/ament_prefix.py makes the venv an ament prefix for erobs_bt
#      (the ament index marker, share/erobs_bt/{package.xml,launch,config,trees} and
#      lib/erobs_bt/<executables>, as links), so that `ros2 launch erobs_bt ...` and `ros2 run
#      erobs_bt ...` find the package with AMENT_PREFIX_PATH=.venv (scripts/env.sh sets it).
# Steps 3-5 keep stamps in .venv/.erobs_bt-setup/ holding a hash of their inputs (requirement
# files, interface sources, packaging files; one stamp per interface package, which also covers
# the interface packages it depends on); a stamp that matches means the step is done.
#
# Environment: EROBS_ROS_DISTRO (jazzy, the default: the distro of EROBS's cell; or kilted),
# PYTHON (interpreter for the venv, default python3), EROBS_VENV (default .venv for Jazzy,
# .venv-kilted for Kilted),
# EROBS_SETUP_FORCE=1 (ignore the stamps).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DISTRO="${EROBS_ROS_DISTRO:-jazzy}"
# The default venv of each distro, as the Makefile names it: .venv (Jazzy), .venv-<distro>.
if [[ "${DISTRO}" == jazzy ]]; then VENV="${EROBS_VENV:-${ROOT}/.venv}"; else VENV="${EROBS_VENV:-${ROOT}/.venv-${DISTRO}}"; fi
[[ "${VENV}" == /* ]] || VENV="${PWD}/${VENV}"
cd "${ROOT}"

PYTHON="${PYTHON:-python3}"
STAMPS="${VENV}/.erobs_bt-setup"
IFACE_ROOT="${ROOT}/interfaces"
LOCK="requirements-${DISTRO}.lock"
ROS_REQUIREMENTS=("requirements-ros-${DISTRO}.txt" "requirements-build-${DISTRO}.txt")
REQUIREMENTS=(requirements.txt requirements-build.txt requirements-dev.txt requirements-madsci.txt
  "${ROS_REQUIREMENTS[@]}" "${LOCK}")
PACKAGING=(setup.py setup.cfg package.xml pyproject.toml resource/erobs_bt requirements.txt requirements-madsci.txt
  requirements-ros-jazzy.txt requirements-ros-kilted.txt)
START=${SECONDS}

step() { printf '==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() {
  printf 'setup.sh: error: %s\n' "$*" >&2
  exit 1
}
took() { info "done in $((SECONDS - $1)) s"; }

# sha256 over a label (versions, paths) and the named files' paths and contents; a missing
# file counts as "missing".
hash_of() {
  local label=$1 file
  shift
  {
    printf '%s\n' "${label}"
    for file in "$@"; do
      printf '%s\n' "${file}"
      if [[ -f "${file}" ]]; then sha256sum <"${file}"; else echo missing; fi
    done
  } | sha256sum | cut -d' ' -f1
}
stamp_matches() { [[ "${EROBS_SETUP_FORCE:-0}" != 1 && -f "${STAMPS}/$1" && "$(cat "${STAMPS}/$1")" == "$2" ]]; }
write_stamp() { mkdir -p "${STAMPS}" && printf '%s\n' "$2" >"${STAMPS}/$1"; }

case "${DISTRO}" in
  jazzy | kilted) ;;
  *) die "EROBS_ROS_DISTRO=${DISTRO}: the ROS 2 wheels are set up for jazzy (the default) or kilted" ;;
esac

# --------------------------------------------------------------------------------------------
step "1/5 system packages"
command -v "${PYTHON}" >/dev/null || die "${PYTHON} not found; install Python 3.11 (Debian 12: apt-get install python3)"
py_version="$("${PYTHON}" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
[[ "${py_version}" == 3.11 ]] ||
  die "${PYTHON} is Python ${py_version}; the ROS 2 wheels need 3.11 (set PYTHON=/path/to/python3.11)"
py_is_system=0
[[ "$("${PYTHON}" -c 'import sys; print(sys.base_prefix)')" == /usr ]] && py_is_system=1

missing=()
command -v dot >/dev/null || missing+=(graphviz)
command -v chromium >/dev/null || missing+=(chromium)   # headless browser for test/test_web_view.py
command -v redis-server >/dev/null || missing+=(redis-server)   # queueserver tests start their own
command -v cmake >/dev/null || missing+=(cmake)
command -v c++ >/dev/null || missing+=(g++)
command -v make >/dev/null || command -v ninja >/dev/null || missing+=(make)
py_needs=()
"${PYTHON}" -c 'import ensurepip, venv' 2>/dev/null || py_needs+=(python3-venv)
"${PYTHON}" -c 'import os, sysconfig; assert os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' \
  2>/dev/null || py_needs+=(python3-dev)
if ((${#py_needs[@]})); then
  ((py_is_system)) || die "${PYTHON} (not Debian's python3) lacks ${py_needs[*]}; reinstall it with headers and venv"
  missing+=("${py_needs[@]}")
fi

if ((${#missing[@]})); then
  apt_t=${SECONDS}
  if [[ ${EUID} -eq 0 ]]; then
    sudo=()
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    die "missing system packages: ${missing[*]}; run: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
  fi
  info "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q >/dev/null
  "${sudo[@]}" apt-get install -y -q "${missing[@]}" >/dev/null
  took "${apt_t}"
else
  info "present: graphviz, chromium, redis-server, cmake, c++, python3.11 headers and venv"
fi
command -v ninja >/dev/null || info "ninja not found: CMake will use make (slower, still fine)"

# --------------------------------------------------------------------------------------------
step "2/5 virtual environment ${VENV} (ROS 2 ${DISTRO^})"
locked_rclpy="$(sed -n 's/^ros-rclpy==//p' "${LOCK}")"
[[ -n "${locked_rclpy}" ]] || die "${LOCK} pins no ros-rclpy"
if [[ -x "${VENV}/bin/python" ]]; then
  venv_rclpy="$("${VENV}/bin/python" -c 'import importlib.metadata as m; print(m.version("ros-rclpy"))' 2>/dev/null || true)"
  # rclpy's major version is the distro's (7 Jazzy, 9 Kilted); a patch release is just an update.
  if [[ -n "${venv_rclpy}" && "${venv_rclpy%%.*}" != "${locked_rclpy%%.*}" ]]; then
    [[ -d "${STAMPS}" ]] ||
      die "${VENV} holds ros-rclpy ${venv_rclpy} (another ROS 2 distro than ${DISTRO}) and was not made by this script; move it away or set EROBS_VENV"
    info "the venv holds ros-rclpy ${venv_rclpy}, ${LOCK} pins ${locked_rclpy} (another ROS 2 distro): recreating it"
    rm -rf -- "${VENV}"
  fi
fi
if [[ -e "${VENV}" ]] && ! "${VENV}/bin/python" -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
  if [[ -f "${VENV}/pyvenv.cfg" ]]; then
    info "existing venv has no working Python 3.11 (moved, or its interpreter is gone): recreating it"
    rm -rf -- "${VENV}"
  elif [[ -n "$(ls -A "${VENV}")" ]]; then
    die "${VENV} exists but is not a venv; move it away"
  fi
fi
if [[ -x "${VENV}/bin/python" ]]; then
  info "exists ($("${VENV}/bin/python" -V 2>&1))"
else
  venv_t=${SECONDS}
  "${PYTHON}" -m venv "${VENV}"
  took "${venv_t}"
fi
VPY="${VENV}/bin/python"
# `pip install ARGS...` with its output in a log file: the progress lines stay readable, and on
# failure the log's tail is shown and the file kept.
pip_install() {
  local log
  log="$(mktemp "${TMPDIR:-/tmp}/erobs_bt-setup-pip.XXXXXX.log")"
  if "${VPY}" -m pip install --disable-pip-version-check --no-input --progress-bar off "$@" >"${log}" 2>&1; then
    rm -f -- "${log}"
  else
    {
      echo "---- first error lines of ${log}:"
      grep -n -iE -m 20 'error|failed' "${log}" || true
      echo "---- last lines:"
      tail -n 30 "${log}"
    } >&2
    die "pip install $* failed; full log: ${log}"
  fi
}

# --------------------------------------------------------------------------------------------
step "3/5 Python requirements (${REQUIREMENTS[*]})"
deps_hash="$(hash_of "python ${py_version}" "${REQUIREMENTS[@]}")"
if stamp_matches deps "${deps_hash}"; then
  info "up to date"
else
  deps_t=${SECONDS}
  pip_pin="$(grep -E '^pip==' "${LOCK}" || true)"
  info "upgrading pip${pip_pin:+ (${pip_pin})}"
  pip_install --upgrade "${pip_pin:-pip}"
  info "installing the requirements at the versions of ${LOCK} (a fresh venv fetches about 1 GB of wheels)"
  pip_install -c "${LOCK}" -r requirements.txt -r "${ROS_REQUIREMENTS[0]}" -r requirements-build.txt \
    -r "${ROS_REQUIREMENTS[1]}" -r requirements-dev.txt -r requirements-madsci.txt
  write_stamp deps "${deps_hash}"
  took "${deps_t}"
fi

# --------------------------------------------------------------------------------------------
step "4/5 ROS interface packages (interfaces/)"
# The build depends on the ROS wheels and build tooling, not on the test tools.
# The lock's ROS pins too: a new patch release of a message or generator wheel changes the build.
build_deps_hash="$(hash_of "python ${py_version} ROS 2 ${DISTRO} $(grep -E '^ros-' "${LOCK}" | tr '\n' ' ')" \
  requirements.txt requirements-build.txt "${ROS_REQUIREMENTS[@]}")"
# Paths relative to interfaces/, so that the stamps do not depend on where the checkout is.
mapfile -t shared_cmake < <(cd "${IFACE_ROOT}" && find cmake -type f | LC_ALL=C sort)
shared_hash="$(cd "${IFACE_ROOT}" && hash_of "shared" "${shared_cmake[@]}")"
iface_status() {
  "${VPY}" "${ROOT}/scripts/interface_packages.py" "${IFACE_ROOT}" ||
    die "scripts/interface_packages.py failed (is catkin_pkg installed? requirements-build.txt)"
}
iface_out="$(iface_status)"
mapfile -t iface_lines <<<"${iface_out}"
[[ -n "${iface_out}" ]] || die "no interface packages found under ${IFACE_ROOT}"
# Stamps of the single-package step of old: keep its CMake tree usable, then drop them.
if [[ -f "${STAMPS}/interfaces-deps" && ! -f "${STAMPS}/iface-deps-erobs_bt_interfaces" ]]; then
  mv -- "${STAMPS}/interfaces-deps" "${STAMPS}/iface-deps-erobs_bt_interfaces"
fi
rm -f -- "${STAMPS}/interfaces" "${STAMPS}/interfaces-deps"
declare -A iface_hash=()
built=0
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
for line in "${iface_lines[@]}"; do
  read -r name dir dist origin needs <<<"${line}"
  pkg_dir="${IFACE_ROOT}/${dir}"
  if [[ "${origin}" == provided:* ]]; then
    info "${name}: provided by ${origin#provided:}, not built (a sourced ROS distribution or another wheel)"
    iface_hash[${name}]="provided ${origin}"
    continue
  fi
  mapfile -t pkg_files < <(cd "${pkg_dir}" && find . -path ./build -prune -o -type f -print | LC_ALL=C sort)
  # One CMake tree per distro (build/<distro>/<wheel tag>), so a Jazzy and a Kilted venv of one
  # checkout keep each other's trees.
  build_root="${pkg_dir}/build/${DISTRO}"
  label="deps ${build_deps_hash} shared ${shared_hash}"
  if [[ "${needs}" != - ]]; then
    for dependency in ${needs//,/ }; do label+=" ${dependency} ${iface_hash[${dependency}]:-?}"; done
  fi
  iface_hash[${name}]="$(cd "${pkg_dir}" && hash_of "${label}" "${pkg_files[@]}")"
  if [[ "${origin}" == venv ]] && stamp_matches "iface-${name}" "${iface_hash[${name}]}"; then
    info "${name}: up to date"
    continue
  fi
  pkg_t=${SECONDS}
  # The CMake tree under build/ is kept for incremental rebuilds; drop it when the ROS wheels or
  # build tools changed since it was configured, or it belongs to another checkout, venv or
  # generator.
  build_deps_changed=1
  stamp_matches "iface-deps-${name}" "${build_deps_hash}" && build_deps_changed=0
  for cache in "${build_root}"/*/CMakeCache.txt; do
    [[ -f "${cache}" ]] || continue
    tree="$(dirname "${cache}")"
    source_dir="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "${cache}")"
    python_exe="$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "${cache}")"
    generator="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "${cache}")"
    if ((build_deps_changed)) || [[ "${source_dir}" != "${pkg_dir}" || "${python_exe}" != "${VENV}/bin/"* ]] ||
      { [[ "${generator}" == Ninja ]] && ! command -v ninja >/dev/null; }; then
      info "${name}: removing stale CMake tree ${tree#"${ROOT}"/}"
      rm -rf -- "${tree}"
    fi
  done
  how=clean
  compgen -G "${build_root}/*/CMakeCache.txt" >/dev/null && how=incremental
  info "${name}: building with CMake (${how}, ROS 2 ${DISTRO^}) and installing ${dist} into the venv"
  pip_install -v --no-build-isolation --no-deps --force-reinstall \
    --config-settings="cmake.define.EROBS_BT_ROS_DISTRO=${DISTRO}" \
    --config-settings="build-dir=build/${DISTRO}/{wheel_tag}" "${pkg_dir}"
  write_stamp "iface-${name}" "${iface_hash[${name}]}"
  write_stamp "iface-deps-${name}" "${build_deps_hash}"
  built=$((built + 1))
  took "${pkg_t}"
done
if ((built)); then
  # Every package must now import (its C type support loads) from the venv or from elsewhere.
  iface_out="$(iface_status)"
  while read -r name dir dist origin needs; do
    if [[ "${origin}" == missing ]]; then
      rm -f -- "${STAMPS}/iface-${name}"
      die "${name} was built and installed (${dist}) but its types do not import"
    fi
  done <<<"${iface_out}"
fi

# --------------------------------------------------------------------------------------------
step "5/5 erobs_bt (pip install -e ., ament prefix)"
pkg_hash="$(hash_of "checkout ${ROOT}" "${PACKAGING[@]}")"
if stamp_matches package "${pkg_hash}" && [[ -x "${VENV}/bin/erobs-bt" ]] &&
  "${VPY}" -c '
import importlib.metadata as metadata, json, sys
info = json.loads(metadata.distribution("erobs_bt").read_text("direct_url.json") or "{}")
sys.exit(info.get("url") != sys.argv[1] or not info.get("dir_info", {}).get("editable"))
' "file://${ROOT}" 2>/dev/null; then
  info "up to date"
else
  pkg_t=${SECONDS}
  pip_install --no-build-isolation --no-deps -e "${ROOT}"
  write_stamp package "${pkg_hash}"
  took "${pkg_t}"
fi
# Cheap and idempotent, so it runs every time (prints only what it changed).
prefix_out="$("${VPY}" "${ROOT}/scripts/ament_prefix.py" "${VENV}")" ||
  die "scripts/ament_prefix.py could not make ${VENV} an ament prefix for erobs_bt"
[[ -z "${prefix_out}" ]] || sed 's/^/    /' <<<"${prefix_out}"

# --------------------------------------------------------------------------------------------
# The 3D cell view's JavaScript (three.js, urdf-loader): `npm ci` from package-lock.json into
# node_modules/, then the files the page loads are copied to erobs_bt/viz/static/vendor/
# (erobs_bt/viz/scene.py says which and why). Stamped by the lock file and scene.py.
step "5+/5 JavaScript of the 3D view (npm ci, static/vendor)"
js_hash="$(hash_of "node $(node --version 2>/dev/null || echo none)" package.json package-lock.json erobs_bt/viz/scene.py)"
if stamp_matches npm "${js_hash}" && [[ -f erobs_bt/viz/static/vendor/three/build/three.module.js ]]; then
  info "up to date"
else
  command -v npm >/dev/null || die "npm not found; install Node.js 18+ and npm (Debian 12: apt-get install nodejs npm)"
  npm_t=${SECONDS}
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null || die "npm ci failed"
  "${VPY}" -m erobs_bt.viz.scene vendor node_modules | sed 's/^/    /'
  write_stamp npm "${js_hash}"
  took "${npm_t}"
fi

step "ready in $((SECONDS - START)) s: ${VENV}/bin/erobs-bt, ${VENV}/bin/erobs_bt_node; \`make test\` runs the tests"
