"""Helpers of the 3D view and history tests: serve a Starlette app on loopback in a thread,
and drive Debian's Chromium (software WebGL) through playwright."""

from __future__ import annotations

import base64
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from browser import launch_chromium
from helpers import wait_for

#: Loading the UR5e's ten megabytes of OBJ meshes with software WebGL on a busy 2-core
#: machine: the page's `ready` promise is awaited this long [ms].
LOAD_TIMEOUT_MS = 180_000


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on ``127.0.0.1:<free port>``; yields ``http://127.0.0.1:PORT``."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="test-uvicorn", daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=30, message="uvicorn started")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@contextmanager
def chromium_page(width: int = 1280, height: int = 860) -> Iterator[Any]:
    """A new page in headless Chromium; page errors fail the test when the page is closed."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright, webgl=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("pageerror", lambda error: errors.append(str(error)))
            yield page
        finally:
            browser.close()
    assert not errors, f"errors in the page: {errors}"


#: JS: statistics of the 3D canvas's pixels (needs preserveDrawingBuffer, which cell3d sets):
#: the share differing from the background colour, and of dark pixels (the UR's black joints).
CANVAS_STATS = """(canvas) => {
  const copy = document.createElement('canvas');
  copy.width = canvas.width; copy.height = canvas.height;
  const context = copy.getContext('2d');
  context.drawImage(canvas, 0, 0);
  const data = context.getImageData(0, 0, copy.width, copy.height).data;
  let differing = 0, dark = 0;
  for (let i = 0; i < data.length; i += 4) {
    const r = data[i], g = data[i + 1], b = data[i + 2];
    if (Math.abs(r - 0xf4) + Math.abs(g - 0xf6) + Math.abs(b - 0xf8) > 24) differing += 1;
    if (r + g + b < 120) dark += 1;
  }
  const n = data.length / 4;
  return {width: copy.width, height: copy.height, differing: differing / n, dark: dark / n};
}"""


def canvas_png(page: Any, selector: str = "canvas.cell3d-canvas") -> bytes:
    """The 3D canvas as PNG bytes (its drawing buffer, independent of what overlaps it)."""
    url = page.eval_on_selector(selector, "(canvas) => canvas.toDataURL('image/png')")
    return base64.b64decode(url.split(",", 1)[1])
