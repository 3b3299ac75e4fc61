"""ddlbench: benchmark distributed deep-learning training on Slurm clusters.

This package root must stay importable by every framework environment
(workloads run on compute nodes, possibly under Python 3.8 with nothing but
the framework installed), so it imports nothing.
"""

__version__ = "0.1.0"
