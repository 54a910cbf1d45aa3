"""A MADSci workcell manager for the tests: ``python test/madsci_workcell.py --port P
--location-port L --redis-port R --node cell1=http://127.0.0.1:N1 --node cell2=...``.

MADSci's own ``WorkcellManager`` (its scheduler and engine) and the ``LocationManager`` it asks
for locations whenever it starts a workflow (the workcell manager fails every workflow
without one: "Location server URL not configured"). Both keep their cache in a real Redis
(Debian's ``redis-server``, started by the test on a private 127.0.0.1 port) and their
documents in MADSci's in-memory ``InMemoryDocumentStorageHandler`` (what MADSci's LocalRunner
uses; no MongoDB/FerretDB is needed). Served by uvicorn on 127.0.0.1 only. Prints
``workcell manager ready`` once both answer.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import httpx
import uvicorn
from madsci.common.db_handlers.document_storage_handler import InMemoryDocumentStorageHandler
from madsci.common.types.location_types import LocationManagerSettings
from madsci.common.types.workcell_types import WorkcellManagerSettings
from madsci.location_manager.location_server import LocationManager
from madsci.workcell_manager.workcell_server import WorkcellManager

READY_LINE = "workcell manager ready"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--location-port", type=int, required=True)
    parser.add_argument("--redis-port", type=int, required=True)
    parser.add_argument("--node", action="append", default=[], help="NAME=URL of a MADSci node")
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
    location_url = f"http://127.0.0.1:{args.location_port}/"
    os.environ["LOCATION_SERVER_URL"] = location_url  # MADSci's context: where the workcell finds it
    locations = LocationManager(
        settings=LocationManagerSettings(
            server_url=location_url, cache_host="127.0.0.1", cache_port=args.redis_port
        ),
        document_handler=InMemoryDocumentStorageHandler(database_name="locations"),
    )
    location_server = uvicorn.Server(
        uvicorn.Config(
            locations.create_server(), host="127.0.0.1", port=args.location_port, log_level="warning"
        )
    )
    threading.Thread(target=location_server.run, name="location-manager", daemon=True).start()
    settings = WorkcellManagerSettings(
        server_url=url,
        manager_name="erobs_bt_test_workcell",
        nodes=dict(item.split("=", 1) for item in args.node),
        cache_host="127.0.0.1",
        cache_port=args.redis_port,
        scheduler_update_interval=0.2,
        node_update_interval=0.5,
        cold_start_delay=0,
    )
    manager = WorkcellManager(
        settings=settings, document_handler=InMemoryDocumentStorageHandler(database_name="workcell")
    )
    app = manager.create_server()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning"))

    def announce() -> None:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and not server.should_exit:
            try:
                if all(
                    httpx.get(f"{base}health", timeout=1.0).status_code == 200 for base in (location_url, url)
                ):
                    print(READY_LINE, flush=True)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)

    threading.Thread(target=announce, daemon=True).start()
    try:
        server.run()
    finally:
        location_server.should_exit = True


if __name__ == "__main__":
    main()
