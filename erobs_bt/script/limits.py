"""Size limits for scripts and the files they resolve against.

A script arrives over the network as one string (the goal field ``full_json``). The
parser holds it, its JSON tree and its expanded steps in memory, and later stages
(the compiled tree, the cache key) grow with the step count, so every dimension a
sender controls is bounded before it can cost anything: the raw size, the nesting
depth, the number of poses, the number of fields it ignores, and the number of steps
*after* macro expansion (a few
bytes of ``pickup_vial`` become eight steps, and a ``RINSE`` with a large
``rinse_count`` would become arbitrarily many). The defaults are far above any real
EROBS script (the largest sample has 30 tasks and 15 poses) and can be raised per
deployment.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Bounds applied while parsing; exceeding one raises :class:`ScriptError`.

    Attributes:
        max_script_bytes: size of the script text in UTF-8 bytes (default 1 MiB).
        max_steps: number of steps after macro expansion (default 10,000).
        max_poses: number of entries in the script's ``poses`` object, and in a pose
            registry or vision-target file (default 10,000).
        max_depth: nesting depth of JSON objects/arrays in the script (default 32;
            the deepest valid field, a constraint's tolerance list, is at depth 6).
        max_file_bytes: size of a pose-registry or vision-target YAML file
            (default 1 MiB).
        max_unknown_fields: number of fields, in the whole script, that erobs_bt does
            not read and ignores with a warning (default 1,000; each is compared with the
            known fields for a misspelling first).
    """

    max_script_bytes: int = 1 << 20
    max_steps: int = 10_000
    max_poses: int = 10_000
    max_depth: int = 32
    max_file_bytes: int = 1 << 20
    max_unknown_fields: int = 1_000

    def __post_init__(self) -> None:
        for name in (
            "max_script_bytes",
            "max_steps",
            "max_poses",
            "max_depth",
            "max_file_bytes",
            "max_unknown_fields",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{name} must be a positive integer (got {value!r})")


#: The default limits (a frozen value, shared safely as the default argument).
DEFAULT_LIMITS = Limits()
