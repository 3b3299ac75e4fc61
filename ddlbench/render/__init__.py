"""Rendering: a plan into sbatch scripts, run configs and a campaign manifest."""

from ddlbench.render.campaign import CampaignRender, render_campaign

__all__ = ["CampaignRender", "render_campaign"]
