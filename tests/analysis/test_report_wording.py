"""Report wording with known truth: singular devices, readable profile, 1-rank allreduce, CIs."""

from __future__ import annotations

import math
import re

import pytest

from ddlbench.analyse.analysis import analyse
from ddlbench.collect.collector import collect_campaign
from ddlbench.report.narrative import profile_text
from ddlbench.report.render import build_report
from tests.support.synth import SynthRun, write_campaign


def test_one_device_is_singular_and_the_profile_is_readable(results):
    runs = [SynthRun(repeat=r, measure_steps=4) for r in range(2)]
    camp = write_campaign(results, "one", runs)
    md = build_report(camp, formats=("md",)).files["md"].read_text()
    assert "1 devices" not in md
    assert "on 1 device " in md
    cluster = md.split("| cluster |")[1].split("\n")[0]
    assert "{" not in cluster and "'" not in cluster
    assert "name synthcluster" in cluster and "slurm.partition gpu" in cluster


def test_profile_text_flattens_and_leaves_out_empty_settings():
    text = profile_text(
        {"name": "c", "max_nodes": None, "slurm": {"partition": "p", "extra_sbatch": []}}
        | {"environments": {"pytorch": {"venv": "/v"}}, "local": {"max_parallel": 2}}
    )
    assert text == "name c; slurm.partition p; local.max_parallel 2"
    # a profile without Slurm: only the time limit of the Slurm settings applies (local runs)
    local = {"name": "l", "scheduler": "local", "slurm": {"time_limit": "00:20:00", "mpi": "pmix"}}
    assert profile_text(local) == "name l; scheduler local; slurm.time_limit 00:20:00"


def test_one_gpu_has_no_pairs_to_link():
    from ddlbench.campaign.node_facts import links_text

    assert links_text({"gpu_links": {"gpus": 1, "matrix": [["X"]]}}) == "1 GPU; no GPU pairs"
    two = {"gpu_links": {"gpus": 2, "matrix": [["X", "NV18"], ["NV18", "X"]]}}
    assert links_text(two) == "2 GPUs; pairs: NV18 x2"


def test_one_rank_allreduce_has_no_bandwidth(results):
    sizes = [1 << 10, 1 << 20]
    runs = [
        SynthRun(mode="allreduce", model="allreduce", batch_size=1, allreduce_sizes=sizes),
        SynthRun(
            mode="allreduce",
            model="allreduce",
            batch_size=1,
            tasks_per_node=2,
            allreduce_sizes=sizes,
        ),
    ]
    camp = write_campaign(results, "ar", runs)
    a = analyse(collect_campaign(camp))
    ar = a.allreduce.set_index("group")
    one = ar.loc["pytorch-allreduce-n1x1"]
    assert one["algbw_gbps"].isna().all() and one["busbw_gbps"].isna().all()
    assert ar.loc["pytorch-allreduce-n1x2"]["busbw_gbps"].notna().all()
    md = build_report(camp, formats=("md",)).files["md"].read_text()
    assert "no communication with 1 rank" in md
    assert not re.search(r"pytorch 1x1 \|[^\n]*\d GB", md)


def test_one_statistic_with_six_repeats(results):
    rates = [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]
    runs = [
        SynthRun(repeat=r, step_time=32 / rate, noise=0.0, repeat_noise=0.0, measure_steps=4)
        for r, rate in enumerate(rates)
    ]
    camp = write_campaign(results, "six", runs)
    a = analyse(collect_campaign(camp))
    c = a.configs.iloc[0]
    # the headline is the geometric mean, its interval the t interval of the mean log
    gmean = math.exp(sum(math.log(r) for r in rates) / 6)
    assert c["throughput_gmean"] == pytest.approx(gmean, rel=1e-6)
    assert 100.0 < c["throughput_ci95_low"] < gmean < c["throughput_ci95_high"] < 105.0
    md = build_report(camp, formats=("md",)).files["md"].read_text()
    assert "samples/s (geo. mean)" in md and "geometric mean over the complete repeats" in md
    # no second statistic with an interval of its own
    assert "CI of median" not in md and "CI (mean)" not in md and "CI of mean" not in md
    assert "medians over the complete repeats" in md  # step time and jitter, described
