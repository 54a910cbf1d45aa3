"""The compiled behaviour tree of a script: context, leaves, decorators, unit boundaries
and the compiler (see :mod:`erobs_bt.tree.compile` for the shape and why)."""
