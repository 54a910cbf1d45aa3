"""A MADSci workcell manager for the tests: ``python test/madsci_workcell.py --port P --redis-port R
--node cell1=http://127.0.0.1:N1 --node cell2=...``.

MADSci's own ``WorkcellManager`` (its scheduler and engine), with its cache in a real Redis
(Debian's ``redis-server``, started by the test on a private 127.0.0.1 port) and its document
database in MADSci's in-memory ``InMemoryDocumentStorageHandler`` (what MADSci's LocalRunner
uses; no MongoDB/FerretDB is needed). Served by uvicorn on 127.0.0.1 only. Prints
``workcell manager ready`` once it answers.
"""

from __future__ import annotations

import argparse
import threading
import time

import httpx
import uvicorn
from madsci.common.db_handlers.document_storage_handler import InMemoryDocumentStorageHandler
from madsci.common.types.workcell_types import WorkcellManagerSettings
from madsci.workcell_manager.workcell_server import WorkcellManager

READY_LINE = "workcell manager ready"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--redis-port", type=int, required=True)
    parser.add_argument("--node", action="append", default=[], help="NAME=URL of a MADSci node")
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
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
                if httpx.get(f"{url}health", timeout=1.0).status_code == 200:
                    print(READY_LINE, flush=True)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)

    threading.Thread(target=announce, daemon=True).start()
    server.run()


if __name__ == "__main__":
    main()
