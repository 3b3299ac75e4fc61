"""The campaigns under a results folder, each summed up from its own files (``ddlbench list``).

Nothing here asks the scheduler: a run's state is its newest attempt's as the campaign's store
last recorded it (``ddlbench status`` polls and updates it), and a run with no attempt is
``NOT_SUBMITTED``. A campaign whose manifest or store cannot be read is still listed, with
what is wrong, so one broken folder never hides the others. Standard library only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from ddlbench.campaign import states as S
from ddlbench.campaign.manifest import ManifestError, read_manifest, scheduler_of
from ddlbench.campaign.paths import CampaignPaths
from ddlbench.campaign.resolve import PathLike, is_dry_run, list_campaigns
from ddlbench.campaign.store_view import read_attempts


@dataclass
class CampaignEntry:
    """One campaign as ``ddlbench list`` shows it."""

    name: str
    path: str
    created: Optional[str] = None
    cluster: Optional[str] = None
    scheduler: Optional[str] = None
    runs: Optional[int] = None
    #: runs per state (the newest attempt's, as the store last recorded it)
    counts: Dict[str, int] = field(default_factory=dict)
    #: every run has ended (None when the runs or their states are unknown)
    ended: Optional[bool] = None
    #: ``data/`` is there and up to date: ``report`` would use it as it is
    collected: bool = False
    #: ``data/`` is there but its inputs changed since: ``report`` collects again
    stale: bool = False
    reports: List[str] = field(default_factory=list)
    latest: bool = False
    #: rendered by ``submit --dry-run``, no run submitted since
    dry_run: bool = False
    problems: List[str] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _manifest(paths: CampaignPaths, entry: CampaignEntry) -> List[str]:
    """Fill the manifest's facts into ``entry``; returns the run ids (empty when unreadable)."""
    try:
        raw = read_manifest(paths.manifest)
    except (OSError, ManifestError) as exc:
        what = exc.detail if isinstance(exc, ManifestError) else str(exc)
        entry.problems.append(f"{paths.manifest.name} cannot be read: {what}")
        return []
    cluster = raw.get("cluster") if isinstance(raw.get("cluster"), dict) else {}
    entry.cluster, entry.scheduler = cluster.get("name"), scheduler_of(cluster)
    entry.created = raw.get("created")
    entry.runs = len(raw["runs"])
    return [str(r["run_id"]) for r in raw["runs"]]


def _states(campaign_dir: Path, run_ids: List[str], entry: CampaignEntry) -> None:
    """Count the runs by their newest attempt's state."""
    newest: Dict[str, str] = {}
    if CampaignPaths(campaign_dir).store.is_file():
        rows = read_attempts(campaign_dir)
        if rows is None:
            entry.problems.append("state.sqlite cannot be read: run states unknown")
            return
        for row in rows.rows:  # ordered by run and attempt number: the newest comes last
            newest[str(row["run_id"])] = str(row["state"])
    counts: Dict[str, int] = {}
    for run_id in run_ids:
        state = newest.get(run_id, S.NOT_SUBMITTED)
        counts[state] = counts.get(state, 0) + 1
    entry.counts = {s: counts[s] for s in S.ALL if s in counts}
    entry.counts.update({s: n for s, n in counts.items() if s not in S.ALL})
    entry.ended = bool(run_ids) and all(s in S.FINAL for s in counts)


#: whether a campaign's collected data is stale: ``ddlbench.collect.freshness.is_stale``,
#: passed in by the command (the decision is the collector's; this package does not import it)
IsStale = Callable[[Path], bool]


def summarise(campaign_dir: PathLike, is_stale: IsStale) -> CampaignEntry:
    """What one campaign folder says of itself."""
    campaign_dir = Path(campaign_dir)
    paths = CampaignPaths(campaign_dir)
    entry = CampaignEntry(name=campaign_dir.name, path=str(campaign_dir.absolute()))
    run_ids = _manifest(paths, entry)
    if entry.runs is not None:
        _states(campaign_dir, run_ids, entry)
    if paths.collect_info.is_file():
        entry.stale = is_stale(campaign_dir)
        entry.collected = not entry.stale
    entry.dry_run = is_dry_run(campaign_dir)
    entry.reports = [str(p.absolute()) for p in paths.reports()]
    return entry


def list_entries(results: Optional[PathLike], is_stale: IsStale) -> List[CampaignEntry]:
    """Every campaign under the results folder, oldest first; the one commands use when no
    campaign is named is marked latest (the last that is not a dry run, else the last)."""
    entries = [summarise(p, is_stale) for p in list_campaigns(results)]
    real = [e for e in entries if not e.dry_run]
    if entries:
        (real or entries)[-1].latest = True
    return entries
