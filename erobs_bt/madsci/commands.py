"""The ``erobs-bt madsci-node`` verb: serve one cell as a MADSci node (:mod:`erobs_bt.madsci.node`).

Imports only click at import time (``erobs-bt --help`` lists it without MADSci installed);
MADSci and rclpy are imported when the verb runs.
"""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

import click

#: Port of MADSci's node default URL (``http://127.0.0.1:2000``).
DEFAULT_PORT = 2000


def default_node_name(node: str | None) -> str:
    """The MADSci node name for a ROS node: its namespace (``/cell1/erobs_bt`` → ``cell1``),
    else the node's own name; ``erobs_bt`` for an embedded engine."""
    if not node:
        return "erobs_bt"
    parts = [part for part in node.strip("/").split("/") if part]
    return parts[-2] if len(parts) >= 2 else parts[-1]


def _url(host: str, port: int) -> str:
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return f"http://{host}:{port}"
    return f"http://[{host}]:{port}" if literal.version == 6 else f"http://{host}:{port}"


_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command("madsci-node")
@click.option(
    "--node",
    "ros_node",
    default=None,
    help="The cell's erobs_bt ROS node, e.g. /cell1/erobs_bt. Without it, an engine runs in this "
    "process (the simulated UR5e, as `erobs-bt run`).",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to serve on (the operator's choice)."
)
@click.option("--port", type=click.IntRange(1, 65535), default=DEFAULT_PORT, show_default=True)
@click.option(
    "--name", "node_name", default=None, help="MADSci node name [default: the ROS node's namespace]."
)
@click.option(
    "--domain-id", type=click.IntRange(0, 232), default=None, help="ROS domain [default: $ROS_DOMAIN_ID]."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="[s] discovery of the ROS node and each request to it.",
)
@click.option(
    "--run-log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The ROS node's run_log_dir when readable here (results then carry each goal's run log and "
    "bag); embedded engine: where it writes them "
    "[default: $EROBS_BT_LOG_DIR or ~/.local/state/erobs_bt/runs].",
)
@click.option("--cell", type=_FILE, default=None, help="Cell YAML: docks and grippers (default: packaged).")
@click.option(
    "--poses",
    type=_FILE,
    default=None,
    help="Pose registry YAML (degrees), for validate and the embedded engine.",
)
@click.option("--faults", type=_FILE, default=None, help="Embedded simulated cell: fault-injection YAML.")
@click.option("--backend", default="sim", show_default=True, help="Embedded engine: motion backend.")
@click.option(
    "--speed",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Embedded sim: time factor.",
)
def madsci_node(
    ros_node: str | None,
    host: str,
    port: int,
    node_name: str | None,
    domain_id: int | None,
    timeout: float,
    run_log_dir: Path | None,
    cell: Path | None,
    poses: Path | None,
    faults: Path | None,
    backend: str,
    speed: float,
) -> None:
    """Serve one erobs_bt cell as a MADSci node (MADSci's REST node API) until Ctrl-C.

    Actions run_script, validate, reset_fault, clear_cache; admin commands pause, resume,
    cancel (unit boundary), safety_stop (stop now), reset, lock, unlock, shutdown.
    """
    try:
        from erobs_bt.madsci.node import ErobsBtNodeConfig, serve
    except ImportError as exc:
        raise click.ClickException(
            f"MADSci is not installed ({exc}); install the extra: pip install 'erobs_bt[madsci]'"
        ) from None
    url = _url(host, port)
    name = node_name or default_node_name(ros_node)
    config = ErobsBtNodeConfig(
        node_name=name,
        node_url=url,
        module_name="erobs_bt",
        ros_node=ros_node,
        domain_id=domain_id,
        request_timeout=timeout,
        run_log_dir=run_log_dir,
        cell=cell,
        poses=poses,
        faults=faults,
        backend=backend,
        speed=speed,
    )
    served = f"erobs_bt node {ros_node}" if ros_node else f"an embedded engine ({backend}, speed {speed:g})"
    click.echo(f"erobs-bt madsci-node: MADSci node '{name}' at {url} serving {served}", err=True)
    serve(config)


COMMANDS = [madsci_node]


def main(argv: list[str] | None = None) -> None:
    """The ``erobs_bt_madsci_node`` console script: ``erobs-bt madsci-node`` under its own name.

    Here, not in :mod:`erobs_bt.madsci.node`: importing MADSci parses the process's arguments
    with MADSci's settings (``--help`` would print MADSci's options and exit).
    """
    madsci_node.main(args=argv if argv is not None else sys.argv[1:], prog_name="erobs_bt_madsci_node")
