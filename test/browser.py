"""Debian's Chromium for the web tests, driven through playwright: one place for its path,
the skip marker, and the command-line flags.

Every browser the tests start is headless, makes no network traffic of its own (no
background updates, sync or first-run pages) and runs without a sandbox (the tests may run
as root in a container). Pages with a 3D view need WebGL: without a GPU that is ANGLE's
software renderer, SwiftShader; pages without one run with the GPU disabled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian chromium is not installed (apt-get install chromium)"
)

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
    """Start Debian's Chromium through a ``sync_playwright()`` instance; the caller closes it."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=chromium_args(webgl=webgl))
