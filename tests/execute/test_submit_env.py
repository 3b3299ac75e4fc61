"""sbatch runs without the caller's SLURM_*, SBATCH_* and SRUN_* variables (an allow-list)."""

from __future__ import annotations

import sys

from ddlbench.execute.slurm.commands import SlurmClient, sbatch_env


def test_sbatch_gets_no_job_option_from_the_callers_environment():
    caller = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "SLURM_CONF": "/etc/slurm/slurm.conf",
        "SLURM_CLUSTERS": "iris",
        "SLURM_TIME_FORMAT": "relative",
        # an salloc --gpus-per-node=1, and a user's defaults
        "SLURM_JOB_ID": "99",
        "SLURM_GPUS_PER_NODE": "1",
        "SLURM_GRES": "gpu:1",
        "SLURM_TRES_BIND": "gpu:closest",
        "SLURM_CONTAINER": "/img",
        "SLURM_MEM_PER_CPU": "2000",
        "SBATCH_PARTITION": "debug",
        "SBATCH_TIMELIMIT": "5",
        "SRUN_CPUS_PER_TASK": "2",
        "MY_SLURM_NOTE": "kept",
    }
    assert sbatch_env(caller) == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "SLURM_CONF": "/etc/slurm/slurm.conf",
        "SLURM_CLUSTERS": "iris",
        "SLURM_TIME_FORMAT": "relative",
        "MY_SLURM_NOTE": "kept",
    }


def test_the_client_runs_a_command_in_the_environment_it_is_given():
    client = SlurmClient(retries=0, backoff=0.0)
    code = "import os; print(sorted(k for k in os.environ if k.startswith('SBATCH_')))"
    res = client.run([sys.executable, "-c", code], env=sbatch_env({"SBATCH_QOS": "x"}))
    assert res.ok and res.stdout.strip() == "[]"
