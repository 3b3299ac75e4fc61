"""``python -m ddlbench`` runs the command line."""

from ddlbench.cli import run

if __name__ == "__main__":
    run()
