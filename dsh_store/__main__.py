"""``python -m dsh_store`` runs the command line."""

from .cli import run

run()
