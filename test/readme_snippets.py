"""The README's code blocks, for tests that run them as written.

A block is found by the section it is in (the heading's text) and its language tag, so a
test runs exactly what a reader copies; editing the block in the README changes the test.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
_HEADING = re.compile(r"^(#+)\s+(.*?)\s*$")
_FENCE = re.compile(r"^```(\w*)\s*$")


def readme_blocks(section: str, language: str, readme: Path = README) -> list[str]:
    """The ``language`` code blocks of the README section whose heading is ``section``, in order.

    The section runs to the next heading of the same or a higher level.

    Raises:
        LookupError: there is no such section, or it has no such block.
    """
    lines = readme.read_text(encoding="utf-8").splitlines()
    blocks: list[str] = []
    level = 0
    inside = False
    fence: str | None = None
    current: list[str] = []
    for line in lines:
        if fence is not None:
            if line.strip() == "```":
                if inside and fence == language:
                    blocks.append("\n".join(current) + "\n")
                fence, current = None, []
            else:
                current.append(line)
            continue
        opening = _FENCE.match(line)
        if opening:
            fence = opening.group(1)
            continue
        heading = _HEADING.match(line)
        if heading:
            depth, title = len(heading.group(1)), heading.group(2)
            if inside and depth <= level:
                break
            if title == section:
                inside, level = True, depth
    if not blocks:
        raise LookupError(f"README.md has no {language!r} block in a section {section!r}")
    return blocks
