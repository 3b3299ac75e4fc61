"""Finding a campaign folder: by name under the results folder, by path, or the latest one.

Every command that takes ``[CAMPAIGN] --results DIR`` asks :func:`resolve_campaign`.

* The results folder is ``--results``, else ``$DDLBENCH_RESULTS``, else ``./results``.
* A campaign is a folder with a manifest (``campaign.json``) directly under the results folder.
* A name with a ``/`` in it, or starting with ``.`` or ``~``, is a path to a campaign folder.
* With no name, the **latest** campaign: the one whose manifest says it was ``created`` last;
  ties (and manifests without ``created``) are broken by the manifest's modification time,
  then by the folder name. Submitting again, collecting or reporting never changes which
  campaign is latest: they do not rewrite the manifest's ``created``.
* A **dry run** (rendered by ``submit --dry-run``, no run submitted since) is never the latest
  while a campaign with submitted runs exists; it is the latest only when there is nothing
  else. Submitting its runs (``submit --resume``) makes it a campaign like any other.

Standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Tuple, Union

from ddlbench.campaign.manifest import manifest_head
from ddlbench.campaign.paths import MANIFEST, CampaignPaths
from ddlbench.errors import InputError, Problem, did_you_mean, quoted

ENV_RESULTS = "DDLBENCH_RESULTS"
DEFAULT_RESULTS = "results"

PathLike = Union[str, Path]


def results_root(results: Optional[PathLike] = None) -> Path:
    """``results``, else ``$DDLBENCH_RESULTS``, else ``./results`` (not resolved)."""
    if results:
        return Path(results).expanduser()
    env = os.environ.get(ENV_RESULTS)
    return Path(env).expanduser() if env else Path(DEFAULT_RESULTS)


def campaign_words(campaign_dir: PathLike) -> str:
    """The campaign as a command line names it: its folder name, with ``--results`` when it is
    not under the default results folder (``$DDLBENCH_RESULTS``, else ``./results``), quoted
    for a shell. Every hint that tells a user what to run next names a campaign so."""
    import shlex

    folder = Path(campaign_dir)
    q = shlex.quote(folder.name)
    if folder.parent.resolve() == results_root().resolve():
        return q
    return f"{q} --results {shlex.quote(str(folder.parent))}"


def _created_key(campaign: Path) -> Tuple[str, float, str]:
    """The order of "latest": the manifest's ``created``, then its mtime, then the name."""
    manifest = CampaignPaths(campaign).manifest
    created = manifest_head(manifest, need=("created",)).get("created") or ""
    try:
        mtime = manifest.stat().st_mtime
    except OSError:
        mtime = 0.0
    return (str(created), mtime, campaign.name)


def list_campaigns(results: Optional[PathLike] = None) -> List[Path]:
    """The campaign folders directly under the results folder, oldest first."""
    root = results_root(results)
    try:
        entries = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [Path(e.path) for e in entries if e.is_dir() and CampaignPaths.of(e.path).is_campaign()]
    return sorted(found, key=_created_key)


def campaign_names(results: Optional[PathLike] = None) -> List[str]:
    """The names of the campaigns under the results folder, sorted by name."""
    return sorted(p.name for p in list_campaigns(results))


def mark_dry_run(campaign: Path) -> None:
    """Mark a campaign just rendered by ``submit --dry-run``."""
    mark = CampaignPaths(campaign).dry_run_mark
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text("rendered by 'ddlbench submit --dry-run'; a dry run until a run is submitted\n")


def is_dry_run(campaign: Path) -> bool:
    """Rendered by ``submit --dry-run`` and no run submitted since (no attempt in the store)."""
    paths = CampaignPaths(campaign)
    if not paths.dry_run_mark.is_file():
        return False
    if not paths.store.is_file():
        return True
    from ddlbench.campaign.store_view import read_attempts

    rows = read_attempts(campaign)
    return rows is not None and not rows.rows


def latest_campaign(results: Optional[PathLike] = None) -> Path:
    """The campaign created last under the results folder (see the module's rule)."""
    found = list_campaigns(results)
    if not found:
        raise InputError(Problem(_nothing_there(results_root(results))))
    real = [p for p in found if not is_dry_run(p)]
    return (real or found)[-1]


def existing_results_root(results: Optional[PathLike] = None) -> Path:
    """The results folder (absolute); an input error naming it when it does not exist."""
    root = results_root(results).absolute()
    if not root.is_dir():
        raise InputError(Problem(_nothing_there(root)))
    return root


def _nothing_there(root: Path) -> str:
    root = root.absolute()
    if not root.is_dir():
        return (
            f"results folder {root} does not exist; name the folder that holds your "
            f"campaigns with --results DIR (or ${ENV_RESULTS})"
        )
    return (
        f"no campaigns in {root} (no folder with a {MANIFEST}); "
        "run 'ddlbench submit SPEC' first, or name another folder with --results DIR"
    )


def _looks_like_path(campaign: str) -> bool:
    return "/" in campaign or campaign.startswith((".", "~"))


def resolve_campaign(campaign: Optional[PathLike], results: Optional[PathLike] = None) -> Path:
    """The folder of ``campaign`` (a name under the results folder, or a path); None: latest."""
    if campaign is None or str(campaign) == "":
        return latest_campaign(results)
    text = str(campaign)
    if _looks_like_path(text):
        path = Path(text).expanduser()
        if CampaignPaths(path).is_campaign():
            return path
        raise InputError(Problem(f"{text} is not a campaign folder (no {MANIFEST} in it)"))
    from ddlbench.names import check_safe_name

    try:
        check_safe_name(text, "campaign name")
    except ValueError as exc:
        raise InputError(Problem(str(exc))) from None
    root = results_root(results)
    path = root / text
    if CampaignPaths(path).is_campaign():
        return path
    raise InputError(Problem(_unknown(text, root)))


def _unknown(name: str, root: Path) -> str:
    root = root.absolute()
    if not root.is_dir():
        return f"no campaign {quoted(name)}: {_nothing_there(root)}"
    known = campaign_names(root)
    msg = f"no campaign {quoted(name)} in results folder {root}{did_you_mean(name, known)}"
    if known:
        shown = ", ".join(known[:12]) + (" ..." if len(known) > 12 else "")
        return f"{msg}; campaigns there: {shown}"
    return f"{msg}; it holds no campaign (name another folder with --results DIR)"
