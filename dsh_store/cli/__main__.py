"""``python -m dsh_store.cli`` runs the command line, as ``python -m dsh_store`` does."""

from . import main

main()
