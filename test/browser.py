"""Debian's Chromium for the web tests, driven through playwright: one place for its path,
the marker, and the command-line flags.

Every browser the tests start is headless, makes no network traffic of its own (no
background updates, sync or first-run pages) and runs without a sandbox (the tests may run
as root in a container). Pages with a 3D view need WebGL: without a GPU that is ANGLE's
software renderer, SwiftShader; pages without one run with the GPU disabled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import require_marker

CHROMIUM = Path("/usr/bin/chromium")

#: The ``browser`` tier: conftest skips these tests where :data:`CHROMIUM` is absent
#: (``apt-get install chromium``), and ``make test-fast`` leaves them out.
needs_chromium = pytest.mark.browser

_COMMON_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
_WEBGL_ARGS = ("--use-angle=swiftshader", "--enable-unsafe-swiftshader")
_NO_GPU_ARGS = ("--disable-gpu",)


def chromium_args(*, webgl: bool) -> list[str]:
    """Chromium's command-line flags: software WebGL when ``webgl``, else no GPU at all."""
    return [*_COMMON_ARGS, *(_WEBGL_ARGS if webgl else _NO_GPU_ARGS)]


def launch_chromium(playwright: Any, *, webgl: bool = False) -> Any:
    """Start Debian's Chromium through a ``sync_playwright()`` instance; the caller closes it.

    Raises:
        RuntimeError: called in a test not marked ``browser`` (:func:`helpers.require_marker`).
    """
    require_marker("browser", "starting Chromium")
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=chromium_args(webgl=webgl))
