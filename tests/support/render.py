"""Rendering a campaign from a spec file and a profile name, as `submit --dry-run` does."""

from __future__ import annotations

from pathlib import Path

from ddlbench.plan import plan_runs
from ddlbench.render import render_campaign
from ddlbench.spec.load import load_profile, load_spec
from tests.support.repo import ROOT

#: the golden job scripts and their spec
GOLDEN = ROOT / "tests" / "golden"


def render(spec_path, profile_name, out: Path, campaign=None):
    spec = load_spec(spec_path)
    profile = load_profile(profile_name)
    plan = plan_runs(spec.value, profile.value, spec.source)
    return render_campaign(
        plan,
        campaign or spec.value.name,
        out,
        spec.source.text,
        str(spec_path),
        profile.source.text,
        profile.path,
    )
