"""``python -m ddlbench`` runs the command line."""

from ddlbench.cli import main

main()
