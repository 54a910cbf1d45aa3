"""What is simulated of the embedded UR5e cell: the arm's controller, the tools' drivers,
fault injection, and their assembly (:func:`erobs_bt.backends.sim.backend.SimBackend`).

The cell's model (kinematics, collision, geometry, tools' bookkeeping, the markers as the
camera sees them) is in :mod:`erobs_bt.world`; planning is in :mod:`erobs_bt.planning`.
Nothing outside this package and the simulated hardware node imports it.

Old module names: before the motion stack (issue 22) the world model and the planner lived
here. ``import erobs_bt.backends.sim.cell`` (and ``kinematics``, ``collision``, ``vision``,
``planner``, ``cartesian``, ``timing``) still works: it gives the module of its new home
(:data:`MOVED_MODULES`), the same module object, imported only when asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

#: Old submodule name → the module that holds it now (README, "Known limits").
MOVED_MODULES: dict[str, str] = {
    "cell": "erobs_bt.world.cell",
    "kinematics": "erobs_bt.world.kinematics",
    "collision": "erobs_bt.world.collision",
    "vision": "erobs_bt.world.vision",
    "planner": "erobs_bt.planning.planner",
    "cartesian": "erobs_bt.planning.cartesian",
    "timing": "erobs_bt.planning.timing",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``erobs_bt.backends.sim.<old>`` and loads it as the module it moved to."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for an old name of :data:`MOVED_MODULES`; ``None`` for every other name."""
        prefix, _, leaf = fullname.rpartition(".")
        if prefix != __name__ or leaf not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        """Import the new home and hand its module object to the import system."""
        return importlib.import_module(MOVED_MODULES[spec.name.rpartition(".")[2]])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed under its new name."""


if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())
