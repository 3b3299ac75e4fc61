"""The local backend: runs sbatch scripts on this machine through a detached runner, one
supervisor per job, and srun/scontrol shims."""
