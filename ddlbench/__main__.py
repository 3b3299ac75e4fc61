"""``python -m ddlbench`` runs the command line."""

from ddlbench.cli import main

if __name__ == "__main__":
    main()
