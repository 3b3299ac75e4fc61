"""ddlbench workloads: the programs that run on the compute nodes.

Each module ``ddlbench.workloads.<name>`` is started as
``python -m ddlbench.workloads.<name> /path/to/run.json`` inside a framework
environment. Workload code imports only the standard library, numpy, the
framework itself and (for the ``digits`` data) scikit-learn, and keeps
Python 3.8 syntax. Shared code lives in ``ddlbench.workloads.common``.
"""
