"""How counts read in what erobs_bt prints: ``1 unit``, ``3 units``; ``16/16 steps completed``
or, for a preview, ``planned``.

The one place for these words: the CLI's lines and tables, the engine's state messages, the
node's log and the viewers all call it, so no line says "1 units" or calls a preview's steps
completed. Imports nothing (``validate``'s start-up). The web console's page counts with the
same rule (``count`` in ``viz/static/app.js``).
"""

from __future__ import annotations

#: Nouns whose plural is not the noun followed by ``s``.
_PLURALS = {"batch": "batches"}


def count(n: int, noun: str) -> str:
    """``1 task``, ``3 tasks``, ``0 units``, ``2 batches``: ``n`` with ``noun`` in the number
    it takes in English (singular for exactly one)."""
    return f"{n} {noun}" if n == 1 else f"{n} {_PLURALS.get(noun, noun + 's')}"


def steps_done(completed: int, total: int, *, dry_run: bool) -> str:
    """``16/16 completed`` of a goal's steps, or ``16/16 planned`` for a preview (a dry run
    executes nothing: its steps were planned)."""
    return f"{completed}/{total} {'planned' if dry_run else 'completed'}"
