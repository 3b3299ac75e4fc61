"""The Slurm backend: sbatch/squeue/sacct/scontrol calls and the Slurm executor."""
