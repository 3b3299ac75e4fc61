"""The workload that runs a spec's own program on each rank (``own_program``) and writes its
rank log from the step marks (``ddlbench.workloads.steps``) or output patterns. Standard
library only; Python 3.8 syntax."""
