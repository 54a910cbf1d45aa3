"""The cell from either configuration format: erobs_bt's cell file or EROBS's beamline file.

One entry point for everything that loads "the cell" (the engine: once, in
:func:`erobs_bt.session.build_engine`, which hands the :class:`CellConfig` to the parser and
the backends' factory; the simulated hardware and move_group nodes; the 3D view):
:func:`load_cell` reads the file once, tells the formats apart
(:func:`erobs_bt.world.beamline.is_beamline_document`) and hands it to the reader of its
format. It sits above both readers, so neither imports the other's caller (the import
contract "no-cycles" in pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

from erobs_bt.validation import read_yaml
from erobs_bt.world import beamline
from erobs_bt.world.cell import DEFAULT_CELL_PATH, CellConfig, CellConfigError, parse_cell


def load_cell(path: str | Path = DEFAULT_CELL_PATH) -> CellConfig:
    """Load and validate a cell from either format.

    Args:
        path: erobs_bt's cell file (default: this repository's ``config/cell.yaml``) or an
            EROBS beamline file (``cms_beamline.yaml``, read by
            :func:`erobs_bt.world.beamline.load_beamline` with its scene, pose registry and
            SRDF).

    Returns:
        The validated, immutable cell.

    Raises:
        CellConfigError: unreadable file, invalid YAML, or an invalid value; the message
            names the file and the key.
    """
    source = str(path)
    document = read_yaml(source, error=CellConfigError)
    if beamline.is_beamline_document(document):
        return beamline.load_beamline(path)
    return parse_cell(document, source=source)
