"""Bluesky queueserver startup code (profile) for an erobs_bt robot cell.

Start an RE Manager with this directory as its startup directory::

    start-re-manager --startup-dir config/queueserver \
        --existing-plans-devices config/queueserver/existing_plans_and_devices.yaml \
        --user-group-permissions config/queueserver/user_group_permissions.yaml \
        --redis-addr 127.0.0.1:6379

The worker runs this file when the environment is opened. It creates the RunEngine, one
:class:`~erobs_bt.bluesky.ErobsRobot` device per node listed in ``EROBS_BT_NODES``
(comma-separated fully qualified node names; default ``/erobs_bt``) and makes the plans
``run_script`` (a run record with the result; checkpoints at unit starts, so a deferred queue
pause stops the robot at a unit boundary) and ``mv`` available to the queue. The first device is
``robot``; with several nodes the others are named after their namespace
(``/cell2/erobs_bt`` → ``robot_cell2``). The worker process needs the ROS environment of the
cells (``ROS_DOMAIN_ID``, discovery settings): start ``start-re-manager`` from a shell that
has them (``scripts/env.sh`` sets the local defaults).

Queue a robot script, e.g. with bluesky-queueserver-api (a relative path is read from the
RE Manager's working folder; here the repository's, as the README starts it)::

    RM.item_add(BPlan("run_script", "robot", "trees/pick_and_place.json"))
"""

# The queueserver loads startup files as IPython startup scripts: names defined here are the
# plans and devices of the environment.
import atexit
import os

from bluesky import RunEngine
from bluesky.plan_stubs import mv
from bluesky_queueserver import parameter_annotation_decorator

from erobs_bt.bluesky import ErobsRobot
from erobs_bt.bluesky import run_script as _run_script

RE = RunEngine({})

# The queue validates plan parameters from annotations; this one says that ``robot`` names a
# device of the environment (a Movable) and ``script`` is a path or JSON text.
run_script = parameter_annotation_decorator(
    {
        "description": "Run an EROBS robot script on an erobs_bt cell (unit-boundary checkpoints).",
        "parameters": {
            "robot": {"description": "the robot device, e.g. robot", "annotation": "__MOVABLE__"},
            "script": {
                "description": "path of the JSON script on the worker's machine, or JSON text",
                "annotation": "str",
            },
            "md": {
                "description": "extra run metadata",
                "annotation": "typing.Optional[dict]",
                "default": None,
            },
        },
    }
)(_run_script)


def _device_name(node: str, first: bool) -> str:
    if first:
        return "robot"
    namespace = node.strip("/").rsplit("/", 1)[0].replace("/", "_")
    return f"robot_{namespace or 'cell'}"


_nodes = [name.strip() for name in os.environ.get("EROBS_BT_NODES", "/erobs_bt").split(",") if name.strip()]
for _index, _node in enumerate(_nodes):
    _device = ErobsRobot(_node, name=_device_name(_node, _index == 0))
    globals()[_device.name] = _device
    atexit.register(_device.destroy)

__all__ = ["RE", "mv", "run_script", *(_device_name(n, i == 0) for i, n in enumerate(_nodes))]
