"""What Slurm's client commands print when they fail, told apart: the controller did not
answer (worth retrying), the client cannot work from here at all (its configuration, its
authentication: no job would be accepted), sacct without accounting storage."""

from __future__ import annotations

import re
from pathlib import Path

from ddlbench.execute.base import SchedulerUnreachable

# what Slurm's clients print when the controller did not answer (worth retrying)
_TRANSIENT = re.compile(
    r"unable to contact slurm controller|socket timed out|connection refused|"
    r"zero bytes were transmitted|temporarily unable to accept|resource temporarily unavailable|"
    r"communication connection failure|connection reset|transport endpoint|"
    r"slurm_receive_msg|slurmctld not responding|controller may be down",
    re.IGNORECASE,
)
# what Slurm's clients print when they cannot work at all from here (their configuration,
# their authentication): no job can be submitted, whatever the job
_CLIENT_TROUBLE = re.compile(
    r"unable to process configuration file|s_p_parse_file|could not establish a configuration|"
    r"fetch_config|ClusterName needs to be specified|invalid authentication credential|"
    r"protocol authentication error|auth/munge|munge.*(?:fail|error|socket)|"
    r"unable to (?:create|get) (?:auth|credential)",
    re.IGNORECASE,
)
# sacct on a cluster without accounting storage
_NO_ACCOUNTING = re.compile(
    r"accounting storage is disabled|slurmdbd|accounting_storage/none|"
    r"not running a supported accounting_storage",
    re.IGNORECASE,
)


def is_transient(text: str) -> bool:
    return bool(_TRANSIENT.search(text or ""))


def is_client_trouble(text: str) -> bool:
    """Whether Slurm's client failed for a reason that no job of its own causes (its
    configuration file, its authentication): every other call would fail the same way."""
    return bool(_CLIENT_TROUBLE.search(text or ""))


def is_no_accounting(text: str) -> bool:
    return bool(_NO_ACCOUNTING.search(text or ""))


class SlurmClientTrouble(SchedulerUnreachable):
    """Slurm's client failed for a reason no job causes: a submission stops at once (exit 75),
    never calling sbatch once per run to be refused the same way; ``status``, ``wait`` and
    ``cancel`` stop with the same exit code, and ``wait`` does not poll again."""

    lasting = True


#: what a submission says after the client's failure
SUBMIT_STOPPED = (
    "submission stopped, the runs not yet submitted stay so: then run "
    "`ddlbench submit --resume {campaign}`"
)

#: what ``status``/``wait`` and ``cancel`` say after it
POLL_THEN = "nothing was changed: run the same ddlbench command again once `sinfo` answers"
CANCEL_THEN = "nothing was cancelled: run `ddlbench cancel {campaign}` again once `sinfo` answers"


def client_trouble(message: str, what: str, then: str) -> SlurmClientTrouble:
    """The error for a client command that failed before reaching the controller."""
    return SlurmClientTrouble(
        f"`{what}` failed before reaching the Slurm controller: {message}. Slurm's client "
        f"cannot work here (check SLURM_CONF and that `sinfo` answers); {then}"
    )


def stop_on_client_trouble(
    stderr: str, message: str, what: str, campaign_dir: Path, then: str = SUBMIT_STOPPED
) -> None:
    """Raise :class:`SlurmClientTrouble` when ``stderr`` says Slurm's client cannot work;
    ``then``: what happened and what to run (``{campaign}``: the campaign as typed)."""
    if is_client_trouble(stderr):
        from ddlbench.campaign.resolve import campaign_words

        campaign = campaign_words(campaign_dir)  # with --results where it must be given
        raise client_trouble(message, what, then.format(campaign=campaign))
