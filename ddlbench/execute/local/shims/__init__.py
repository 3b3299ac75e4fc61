"""Stand-ins for Slurm's ``srun`` and ``scontrol`` used by the local executor.

They run inside a local job (see ddlbench.execute.local.job), which exports the job-level
SLURM_* variables; standard library only, and quick to start.
"""
