"""Motion backends: the simulated UR5e cell (default), MoveIt (where installed) and the
deterministic scripted backend used by the tests. The tree sees them only through
:class:`erobs_bt.backends.base.MotionBackend`."""
