"""The CLI's rich console, in a module of its own so that commands which print but run no
goal (``validate``) do not import the orchestrator; :mod:`erobs_bt.console` re-exports it."""

from __future__ import annotations

import sys

from rich.console import Console


def make_console(*, stderr: bool = False) -> Console:
    """A rich console for the CLI.

    On a terminal it behaves as usual; when the output goes to a file or a pipe (a log,
    CI) lines are not wrapped at 80 columns, so paths and messages stay copyable. Emoji
    codes are not replaced (``emoji=False``): a ``:name:`` in a message is what the user
    wrote, and rich's emoji table (about 5 ms of start-up) is never loaded.
    """
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, emoji=False)
    return Console(stderr=stderr, width=200, soft_wrap=True, emoji=False)
