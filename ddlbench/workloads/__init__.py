"""ddlbench workloads: the programs that run on the compute nodes.

Every rank is started as ``python -m ddlbench.workloads.node.rank_start <workload> run.json``
inside a framework environment, which runs the workload's module (``WORKLOAD_MODULES`` in
``vocabulary``). A framework's code lives in its folder (``pytorch/``, ``tf/``, ``mx/``,
``hvd/``), node-side tools in ``node/``, the communication tests in ``comm/``, shared rank-side
code in ``common/`` (docs/architecture.md#the-workloads-folder). Workload code imports only the
standard library, numpy, its framework and (for the ``digits`` data) scikit-learn, and keeps
Python 3.8 syntax.
"""
