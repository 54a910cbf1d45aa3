"""``python -m erobs_bt`` runs the ``erobs-bt`` command line."""

from erobs_bt.cli import main

main()
