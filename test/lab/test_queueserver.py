"""The queueserver profile (config/queueserver/) with a real RE Manager and a real node.

The test starts Debian's ``redis-server`` on a private 127.0.0.1 port, an erobs_bt node in
its own ROS domain and ``start-re-manager`` with the profile (its 0MQ sockets on
127.0.0.1), queues ``run_script`` through bluesky-queueserver-api and checks that the node
ran the script. Then a script with a ``pause`` step: while the robot waits at the step
(deterministic), the queue gets a deferred pause; the operator resumes the step, the plan
reaches its checkpoint at the next unit start, the RunEngine pauses and the robot stops at
the unit boundary after that unit; a queue resume completes the same goal. The README's
queueserver client (step 4 of its beamline set-up) is run as written against the same RE
Manager, which runs from the repository's folder as the README's step 3 does. Every process
is stopped by its PID.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from bluesky_queueserver_api import BPlan
from bluesky_queueserver_api.zmq import REManagerAPI
from readme_snippets import readme_blocks
from ros_fixtures import REPO, NodeProcess, RosEnvironment, ros_environment

from erobs_bt.ros.client.client import ErobsBtClient

from helpers import LED, free_port, move, script

pytestmark = pytest.mark.ros

SPEED = 5.0
WAIT = 180.0
PROFILE = REPO / "config" / "queueserver"


class Process:
    """A server process whose output is read on a thread; ready when a line contains ``ready``."""

    def __init__(self, command: list[str], env: dict[str, str], ready: str, cwd: Path) -> None:
        self.command = command
        self.lines: list[str] = []
        self._ready_text = ready
        self._ready = threading.Event()
        self.process = subprocess.Popen(
            command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if self._ready_text in line:
                self._ready.set()
        self._ready.set()  # exited: wake the waiter

    def wait_ready(self, timeout: float) -> None:
        if not self._ready.wait(timeout) or self.process.poll() is not None:
            raise RuntimeError(f"{self.command[0]} did not start:\n" + "\n".join(self.lines[-40:]))

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@pytest.fixture
def ros_env(tmp_path: Path) -> Iterator[RosEnvironment]:
    with ros_environment(tmp_path / "ros_log") as environment:
        yield environment


@pytest.fixture
def node(ros_env: RosEnvironment) -> Iterator[NodeProcess]:
    process = NodeProcess(ros_env, {"speed": SPEED})
    process.start()
    yield process
    assert process.stop() == 0, process.output


@pytest.fixture
def redis(tmp_path: Path, ros_env: RosEnvironment) -> Iterator[int]:
    server = shutil.which("redis-server")
    assert server, "redis-server not installed (scripts/setup.sh installs Debian's)"
    port = free_port()
    process = Process(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        dict(ros_env.env),
        "Ready to accept connections",
        tmp_path,
    )
    process.wait_ready(30.0)
    yield port
    process.stop(signal.SIGTERM)


@pytest.fixture
def zmq_addresses() -> dict[str, str]:
    """The RE Manager's private 0MQ addresses, under the environment variables its clients read."""
    return {
        "QSERVER_ZMQ_CONTROL_ADDRESS": f"tcp://127.0.0.1:{free_port()}",
        "QSERVER_ZMQ_INFO_ADDRESS": f"tcp://127.0.0.1:{free_port()}",
    }


@pytest.fixture
def manager(
    tmp_path: Path, ros_env: RosEnvironment, redis: int, node: NodeProcess, zmq_addresses: dict[str, str]
) -> Iterator[REManagerAPI]:
    control, info = zmq_addresses["QSERVER_ZMQ_CONTROL_ADDRESS"], zmq_addresses["QSERVER_ZMQ_INFO_ADDRESS"]
    env = {**ros_env.env, "EROBS_BT_NODES": "/erobs_bt"}
    command = [
        str(Path(sys.executable).with_name("start-re-manager")),
        "--startup-dir",
        str(PROFILE),
        "--existing-plans-devices",
        str(tmp_path / "existing_plans_and_devices.yaml"),
        "--user-group-permissions",
        str(PROFILE / "user_group_permissions.yaml"),
        "--redis-addr",
        f"127.0.0.1:{redis}",
        "--redis-name-prefix",
        f"erobs_bt_test_{redis}",
        "--zmq-control-addr",
        control,
        "--zmq-info-addr",
        info,
    ]
    # From the repository's folder, as the README starts it: relative script paths are read there.
    process = Process(command, env, "Ready to accept connections", REPO)
    # Replies wait up to 30 s (default 2 s): on a loaded 2-core machine the manager can take
    # longer than 2 s to answer queue_start while its worker is busy, which is not a failure.
    api = REManagerAPI(zmq_control_addr=control, zmq_info_addr=info, timeout_recv=30.0, timeout_send=10.0)
    try:
        api.wait_for_idle(timeout=60)  # answers once the manager is up
        yield api
    finally:
        try:
            if api.status(reload=True)["worker_environment_exists"]:
                api.environment_close()
                api.wait_for_idle(timeout=60)
            api.manager_stop()
        except Exception:
            pass
        api.close()
        process.stop(signal.SIGINT, timeout=30.0)
        print("\n".join(process.lines[-60:]))


def test_a_queued_run_script_runs_on_the_node_and_a_deferred_queue_pause_stops_at_a_unit_boundary(
    manager: REManagerAPI, node: NodeProcess, tmp_path: Path
) -> None:
    with ErobsBtClient(domain_id=node.environment.domain_id) as observer:
        assert observer.wait_for_server(30.0), node.output
        assert observer.wait_for_state_stream(30.0)
        manager.environment_open()
        manager.wait_for_idle(timeout=WAIT)
        status = manager.status()
        assert status["worker_environment_exists"], manager.status()
        assert "robot" in manager.devices_allowed()["devices_allowed"]
        assert "run_script" in manager.plans_allowed()["plans_allowed"]

        # 1. A queued script runs on the node.
        simple = tmp_path / "simple.json"
        simple.write_text(script([move("vial_scan"), LED, move("safe_sample_transport")]), encoding="utf-8")
        since = observer.states.count
        assert manager.item_add(BPlan("run_script", "robot", str(simple)))["success"]
        manager.queue_start()
        manager.wait_for_idle(timeout=WAIT)
        finished = [m for m in observer.states.items()[since:] if "succeeded" in m.message]
        assert finished, [(m.state, m.message) for m in observer.states.items()[since:]]
        history = manager.history_get()["items"]
        assert history[-1]["result"]["exit_status"] == "completed", history[-1]["result"]

        # 2. A deferred queue pause stops the robot at a unit boundary; resume completes the goal.
        # units: 1 = move, 2 = pause step, 3 = six-move batch, 4 = LED, 5 = move, 6 = LED, 7 = move
        long_batch = [move("sample_scan_1"), move("pipettor_scan")] * 3
        tasks = [move("vial_scan"), {"task_type": "pause"}, *long_batch, LED, move("vial_scan"), LED]
        paused_script = tmp_path / "with_pause.json"
        paused_script.write_text(script([*tasks, move("safe_sample_transport")]), encoding="utf-8")
        since = observer.states.count
        assert manager.item_add(BPlan("run_script", "robot", str(paused_script)))["success"]
        manager.queue_start()
        at_step = observer.wait_for_state("PAUSED", WAIT, since=since)
        assert at_step is not None and "pause step" in at_step.message, at_step
        assert manager.re_pause(option="deferred")["success"]

        after_step = observer.states.count
        assert observer.resume() == (True, "Resumed")  # the operator releases the pause step
        paused = observer.wait_for_state("PAUSED", WAIT, since=after_step)
        assert paused is not None, [(m.state, m.message) for m in observer.states.items()[after_step:]]
        assert paused.message.startswith("paused before unit"), paused.message
        assert paused.unit_index >= 3 and paused.current_step < paused.total_steps
        manager.wait_for_idle_or_paused(timeout=WAIT)
        assert manager.status()["manager_state"] == "paused"

        assert manager.re_resume()["success"]
        manager.wait_for_idle(timeout=WAIT)
        states = observer.states.items()[since:]
        assert len({m.goal_id for m in states if m.goal_id}) == 1, "one goal, never sent twice"
        assert any("succeeded" in m.message for m in states), [(m.state, m.message) for m in states]
        history = manager.history_get()["items"]
        assert history[-1]["result"]["exit_status"] == "completed", history[-1]["result"]


def test_the_readmes_queueserver_client_runs_as_written(
    manager: REManagerAPI, node: NodeProcess, zmq_addresses: dict[str, str]
) -> None:
    """Step 4 of the README's beamline set-up, run by Python from the repository's folder.

    Only the RE Manager's addresses differ from the README's defaults, and the client reads
    them from ``QSERVER_ZMQ_CONTROL_ADDRESS``/``QSERVER_ZMQ_INFO_ADDRESS`` (bluesky-queueserver-api);
    the script it queues must be one the repository has.
    """
    blocks = readme_blocks("Bluesky and the queueserver (a beamline set-up)", "bash")
    block = next(b for b in blocks if "start-re-manager" in b)
    # Step 3's files are the repository's (or written into its folders): nothing outside it.
    command = re.search(r"^EROBS_BT_NODES=.*?start-re-manager.*?(?<!\\)$", block, re.M | re.S)
    assert command, block
    step3 = shlex.split(command.group(0).replace("\\\n", " "))
    for option in ("--startup-dir", "--existing-plans-devices", "--user-group-permissions"):
        path = Path(step3[step3.index(option) + 1])
        inside = not path.is_absolute() and (REPO / path).parent.is_dir()
        assert inside, f"{option} {path}: not in the repository"
    heredoc = re.search(r"^python - <<'PY'\n(.*?)^PY$", block, re.MULTILINE | re.DOTALL)
    assert heredoc, block
    client = heredoc.group(1)
    with ErobsBtClient(domain_id=node.environment.domain_id) as observer:
        assert observer.wait_for_server(30.0), node.output
        assert observer.wait_for_state_stream(30.0)
        since = observer.states.count
        done = subprocess.run(
            [sys.executable, "-"],
            input=client,
            cwd=REPO,
            env={**node.environment.env, **zmq_addresses},
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        manager.status(reload=True)  # not the status cached before the snippet's queue_start
        manager.wait_for_idle(timeout=WAIT)
        history = manager.history_get()["items"]
        assert [item["name"] for item in history] == ["run_script"], history
        assert history[-1]["result"]["exit_status"] == "completed", history[-1]["result"]
        finished = observer.states.wait_for(lambda m: "succeeded" in m.message, 30.0, since=since)
        assert finished is not None, [(m.state, m.message) for m in observer.states.items()[since:]]
