"""Store states are read in the campaign's state vocabulary (ddlbench.campaign.states)."""

from __future__ import annotations

import pytest

from ddlbench.campaign import states as S
from ddlbench.collect.collector import collect_campaign
from ddlbench.collect.run_states import is_unsuccessful, vocabulary_state
from tests.support.synth import SynthRun, run_states, write_campaign


@pytest.mark.parametrize(
    "word, state",
    [
        ("COMPLETING", S.RUNNING),
        ("CONFIGURING", S.PENDING),
        ("BOOT_FAIL", S.NODE_FAIL),
        ("DEADLINE", S.TIMEOUT),
        ("SUBMIT_FAILED", S.SUBMIT_FAILED),
        ("LOST", S.LOST),
        ("NOT_SUBMITTED", S.NOT_SUBMITTED),
        ("SOMETHING_NEW", None),
        ("unknown", None),
    ],
)
def test_state_words_map_into_the_vocabulary(word, state):
    assert vocabulary_state(word) == state


def test_every_unsuccessful_final_state_fails_a_run():
    assert {s for s in S.ALL if is_unsuccessful(s)} == set(S.UNSUCCESSFUL)


def test_status_from_slurm_words(results):
    runs = [
        SynthRun(repeat=0, not_run=True, slurm_state="COMPLETING"),
        SynthRun(repeat=1, not_run=True, slurm_state="CONFIGURING"),
        SynthRun(repeat=2, killed_ranks=(0,), slurm_state="BOOT_FAIL"),
        SynthRun(repeat=3, not_run=True, slurm_state="NOT_SUBMITTED"),
        SynthRun(repeat=4, slurm_state="CANCELLED by 0"),
    ]
    camp = write_campaign(results, "states", runs)
    d = collect_campaign(camp, run_states=run_states(runs))
    got = d.runs.set_index("run_id")[["slurm_state", "status"]]
    assert got.to_dict("index") == {
        "pytorch-resnet50-n1x1-b32-r0": {"slurm_state": "COMPLETING", "status": "running"},
        "pytorch-resnet50-n1x1-b32-r1": {"slurm_state": "CONFIGURING", "status": "pending"},
        "pytorch-resnet50-n1x1-b32-r2": {"slurm_state": "BOOT_FAIL", "status": "failed"},
        "pytorch-resnet50-n1x1-b32-r3": {"slurm_state": "NOT_SUBMITTED", "status": "not_run"},
        "pytorch-resnet50-n1x1-b32-r4": {"slurm_state": "CANCELLED", "status": "ok"},
    }
    problems = d.runs.set_index("run_id")["problems"]
    assert "job ended CANCELLED after every rank wrote its summary" in problems.iloc[4]
