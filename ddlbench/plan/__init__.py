"""Sweep planning: an experiment spec and a cluster profile expanded into runs."""

from ddlbench.plan.planner import Plan, Run, plan_runs, scaled_lr

__all__ = ["Plan", "Run", "plan_runs", "scaled_lr"]
