"""erobs_bt built by colcon (colcon-core, colcon-ros and colcon-python-setup-py from PyPI, pinned
in requirements-dev.txt), plain and ``--symlink-install``, into temporary directories; the
installed node is found through the install's ament index, started from it, and runs a short
goal.

A plain ``colcon build`` copies the Python package into ``install/erobs_bt/lib/python3.11/
site-packages`` and the data files into ``install/erobs_bt/share/erobs_bt``: nothing next to
the installed modules holds ``config/``, so the data must be found through the ament index
(:mod:`erobs_bt.paths`). ``--symlink-install`` links the modules to the checkout.

Each build takes a minute or more on a busy 2-core machine: marked ``slow`` (still in CI).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ros_fixtures import READY_PREFIX, REPO, RosProcess, ros_environment

from erobs_bt.ros.client.client import ErobsBtClient

from helpers import SUCK, move, script_json

pytestmark = pytest.mark.slow

COLCON = Path(sys.prefix) / "bin" / "colcon"
#: The site-packages directory a colcon install of this interpreter puts Python packages in.
SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


def colcon_build(root: Path, *extra: str) -> Path:
    """``colcon build`` of the erobs_bt package of this checkout into ``root``; returns the
    install base. Raises AssertionError with colcon's output when the build fails."""
    assert COLCON.is_file(), f"{COLCON} missing: run `make setup` (requirements-dev.txt has colcon)"
    install = root / "install"
    command = [
        str(COLCON),
        "--log-base",
        str(root / "log"),
        "build",
        "--base-paths",
        str(REPO),
        "--packages-select",
        "erobs_bt",
        "--build-base",
        str(root / "build"),
        "--install-base",
        str(install),
        "--event-handlers",
        "console_direct-",
        *extra,
    ]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"colcon build failed:\n{done.stdout}\n{done.stderr}"
    return install


def sourced(install: Path) -> dict[str, str]:
    """The environment after ``. install/local_setup.sh`` (colcon's POSIX shell setup file):
    the install first on ``AMENT_PREFIX_PATH`` and ``PYTHONPATH``."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        ["sh", "-c", '. "$1/local_setup.sh" && env -0', "sh", str(install)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)


def installed_where(env: dict[str, str], cwd: Path) -> tuple[Path, Path]:
    """(the erobs_bt module file, :func:`erobs_bt.paths.share_dir`) as the installed package
    sees them."""
    code = "import erobs_bt.paths as p; print(p.__file__); print(p.share_dir())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, check=True
    )
    module, share = done.stdout.split()
    return Path(module), Path(share)


def executable(env: dict[str, str], name: str) -> Path:
    """``<prefix>/lib/erobs_bt/<name>`` of erobs_bt's prefix in the ament index of ``env`` (what
    ``ros2 run`` and ``launch_ros`` start)."""
    code = (
        "import sys; from ament_index_python.packages import get_package_prefix;"
        "print(get_package_prefix('erobs_bt'))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    path = Path(done.stdout.strip()) / "lib" / "erobs_bt" / name
    assert path.is_file() and os.access(path, os.X_OK), f"{path} is not an executable"
    return path


@pytest.fixture(scope="module", params=["plain", "symlink-install"])
def install(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp(f"colcon-{request.param}")
    extra = ("--symlink-install",) if request.param == "symlink-install" else ()
    yield colcon_build(root, *extra)


@pytest.mark.ros
def test_the_installed_node_finds_its_data_and_runs_a_goal(install: Path, tmp_path: Path) -> None:
    env = sourced(install)
    prefix = install / "erobs_bt"
    assert env["AMENT_PREFIX_PATH"].split(":")[0] == str(prefix)
    module, share = installed_where(env, tmp_path)
    if (prefix / SITE / "erobs_bt" / "paths.py").is_file() and not (prefix / SITE / "erobs_bt").is_symlink():
        # plain: the modules are copies in the install, the data only in its share directory
        assert module.is_relative_to(prefix), module
        assert share == prefix / "share" / "erobs_bt"
    else:
        # --symlink-install: the modules resolve to this checkout
        assert Path(os.path.realpath(module)).is_relative_to(REPO), module
        assert share == REPO
    for name in (
        "package.xml",
        "launch/erobs_bt.launch.py",
        "config/cell.yaml",
        "config/vision_targets.yaml",
    ):
        assert (prefix / "share" / "erobs_bt" / name).is_file(), name
    node_executable = executable(env, "erobs_bt_node")
    assert node_executable.is_relative_to(prefix)

    with ros_environment(tmp_path / "ros_log") as environment:
        node = RosProcess(
            environment,
            [str(node_executable), "--ros-args", "-p", "speed:=20.0"],
            READY_PREFIX,
            env={key: env[key] for key in ("AMENT_PREFIX_PATH", "PYTHONPATH", "PATH") if key in env},
        )
        node.start(timeout=120.0)
        try:
            with ErobsBtClient(domain_id=environment.domain_id) as client:
                assert client.wait_for_server(30.0), node.output
                run = client.send(script_json([move("a"), SUCK, move("home")]))
                assert run.accepted, run.rejection
                result = run.wait(120.0)
                assert result.success, (result.error_message, node.output)
                assert result.completed_steps == result.total_steps == 3
        finally:
            assert node.stop() == 0, node.output
