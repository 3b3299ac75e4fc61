"""Run states: one vocabulary for every executor, named after Slurm's job states."""

from __future__ import annotations

SUBMITTING = "SUBMITTING"  # intent recorded, sbatch not (yet) known to have answered
SUBMIT_FAILED = "SUBMIT_FAILED"  # the scheduler rejected the job; it never ran
PENDING = "PENDING"
RUNNING = "RUNNING"
SUSPENDED = "SUSPENDED"
REQUEUED = "REQUEUED"
PREEMPTED = "PREEMPTED"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
TIMEOUT = "TIMEOUT"
CANCELLED = "CANCELLED"
NODE_FAIL = "NODE_FAIL"
OUT_OF_MEMORY = "OUT_OF_MEMORY"
LOST = "LOST"  # the scheduler forgot the job and no record of its end was found
#: a rank's watchdog found no step completing in time and ended the job (docs/bad-nodes.md)
HUNG = "HUNG"
#: the exit code of a rank whose watchdog fired (ddlbench.workloads.common.watchdog)
HUNG_EXIT_CODE = 86
#: the exit code of a rank stopped by SIGUSR1, Slurm's ``--signal`` warning before the time
#: limit (ddlbench.workloads.common.runner): the run ended TIMEOUT, with a record in each log
STOPPED_EXIT_CODE = 87
#: run-level only: the run has no attempt yet
NOT_SUBMITTED = "NOT_SUBMITTED"

FINAL = frozenset(
    {COMPLETED, FAILED, TIMEOUT, CANCELLED, NODE_FAIL, OUT_OF_MEMORY, SUBMIT_FAILED, LOST, HUNG}
)
LIVE = frozenset({SUBMITTING, PENDING, RUNNING, SUSPENDED, REQUEUED, PREEMPTED})
ALL = tuple(
    [NOT_SUBMITTED, SUBMITTING, PENDING, RUNNING, SUSPENDED, REQUEUED, PREEMPTED]
    + [COMPLETED, FAILED, HUNG, TIMEOUT, CANCELLED, NODE_FAIL, OUT_OF_MEMORY, SUBMIT_FAILED, LOST]
)
#: final states that are not success: what ``ddlbench retry --failed`` resubmits
UNSUCCESSFUL = FINAL - {COMPLETED}

# Slurm's job states (squeue %T, sacct State, scontrol JobState, jobcomp JobState) to ours.
_SLURM = {
    "PENDING": PENDING,
    "CONFIGURING": PENDING,
    "RUNNING": RUNNING,
    "COMPLETING": RUNNING,
    "STAGE_OUT": RUNNING,
    "SIGNALING": RUNNING,
    "RESIZING": RUNNING,
    "SUSPENDED": SUSPENDED,
    "STOPPED": SUSPENDED,
    "REQUEUED": REQUEUED,
    "REQUEUE_FED": REQUEUED,
    "REQUEUE_HOLD": REQUEUED,
    "PREEMPTED": PREEMPTED,
    "COMPLETED": COMPLETED,
    "FAILED": FAILED,
    "SPECIAL_EXIT": FAILED,
    "TIMEOUT": TIMEOUT,
    "DEADLINE": TIMEOUT,
    "CANCELLED": CANCELLED,
    "REVOKED": CANCELLED,
    "NODE_FAIL": NODE_FAIL,
    "BOOT_FAIL": NODE_FAIL,
    "OUT_OF_MEMORY": OUT_OF_MEMORY,
}
_SHORT = {
    "PD": "PENDING",
    "CF": "CONFIGURING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "SO": "STAGE_OUT",
    "SI": "SIGNALING",
    "RS": "RESIZING",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "RQ": "REQUEUED",
    "RF": "REQUEUE_FED",
    "RH": "REQUEUE_HOLD",
    "PR": "PREEMPTED",
    "CD": "COMPLETED",
    "F": "FAILED",
    "SE": "SPECIAL_EXIT",
    "TO": "TIMEOUT",
    "DL": "DEADLINE",
    "CA": "CANCELLED",
    "RV": "REVOKED",
    "NF": "NODE_FAIL",
    "BF": "BOOT_FAIL",
    "OOM": "OUT_OF_MEMORY",
}


def from_slurm(text: str, *, finished: bool = False) -> str:
    """Map a Slurm state string (``CANCELLED by 0``, ``FAILED``, ``PD``...) to a ddlbench state.

    ``finished`` says the record describes a job that has left the controller (sacct, jobcomp):
    a job that ended PREEMPTED without being requeued then counts as CANCELLED.
    """
    word = (text or "").strip().split(" ")[0].split("+")[0].upper()
    word = _SHORT.get(word, word)
    state = _SLURM.get(word)
    if state is None:
        # an unknown (newer) state: not final, so nothing is concluded from it
        return RUNNING
    if finished and state in LIVE:
        return CANCELLED if state == PREEMPTED else state
    return state


def is_final(state: str) -> bool:
    return state in FINAL
