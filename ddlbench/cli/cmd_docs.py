"""ddlbench docs [TOPIC]: the user documentation, from the install or the checkout."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Optional

import click

#: the folder of docs/ whose pages are topics ``studies/NAME``
STUDIES = "studies"


def _topics() -> Dict[str, Path]:
    """Every page by topic: ``spec`` for docs/spec.md, ``studies/large-batch`` for the pages
    of docs/studies/ (the studies behind a feature's figures)."""
    from ddlbench.shipped import shipped_docs

    folder = shipped_docs()
    if folder is None or not folder.is_dir():
        return {}
    pages = {p.stem: p for p in sorted(folder.glob("*.md"))}
    pages.update({f"{STUDIES}/{p.stem}": p for p in sorted((folder / STUDIES).glob("*.md"))})
    return pages


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def _find(topic: str, topics: Dict[str, Path]) -> Optional[Path]:
    """The page of ``topic``: a topic (``spec``, ``studies/large-batch``) or a path to a page
    (``docs/spec.md``); a study's bare name (``large-batch``) finds it when no page of docs/
    has that name."""
    name = re.sub(r"\.md$", "", topic.strip().lower())
    name = re.sub(r"^(\./)?docs/", "", name)
    last = name.split("/")[-1]
    return topics.get(name) or topics.get(last) or topics.get(f"{STUDIES}/{last}")


@click.command(
    epilog="""\b
Examples:
  ddlbench docs                      # the topics, with their titles
  ddlbench docs cluster-profiles     # print docs/cluster-profiles.md
  ddlbench docs spec | less
  ddlbench docs failures --path      # where the file is
  ddlbench docs spec#how-much-to-measure   # one section of a page
"""
)
@click.argument("topic", required=False)
@click.option("--path", "show_path", is_flag=True, help="Print the file's path, not its text.")
def command(topic: Optional[str], show_path: bool) -> None:
    """Print ddlbench's documentation: the list of topics, or one topic's Markdown page.

    The pages are the docs/ folder of the source tree; a wheel carries them, so an installed
    ddlbench has the same pages as the checkout it was built from. Links between pages name
    other topics (spec.md is `ddlbench docs spec`).
    """
    from ddlbench.errors import InputError, Problem, did_you_mean

    topics = _topics()
    if not topics:
        raise InputError(Problem("ddlbench's documentation is not installed here"))
    if topic is None:
        width = max(len(t) for t in topics)
        for name, path in topics.items():
            click.echo(f"{name:<{width}}  {_title(path)}")
        click.echo("\n'ddlbench docs TOPIC' prints a page")
        return
    page, _, anchor = topic.partition("#")
    path = _find(page, topics)
    if path is None:
        raise InputError(
            Problem(
                f"no documentation topic '{page}'{did_you_mean(page, list(topics))}; "
                "'ddlbench docs' lists them"
            )
        )
    if show_path:
        click.echo(str(path))
        return
    text = path.read_text(encoding="utf-8")
    if anchor:
        text = _section(text, anchor, page)
    click.echo(text, nl=False)


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _section(text: str, anchor: str, page: str) -> str:
    """The section of ``text`` whose heading has ``anchor`` (``spec#how-much-to-measure``),
    down to the next heading of its level or above."""
    from ddlbench.errors import InputError, Problem, did_you_mean

    lines = text.splitlines(keepends=True)
    heads = [(i, len(m.group(1)), _slug(m.group(2))) for i, m in _headings(lines)]
    for k, (i, level, slug) in enumerate(heads):
        if slug == anchor.lower():
            end = next((j for j, lv, _ in heads[k + 1 :] if lv <= level), len(lines))
            return "".join(lines[i:end])
    slugs = [slug for _, _, slug in heads]
    raise InputError(
        Problem(
            f"topic '{page}' has no section '{anchor}'{did_you_mean(anchor, slugs)}; "
            f"'ddlbench docs {page}' prints the whole page"
        )
    )


def _headings(lines):
    """``(line index, match)`` of the Markdown headings outside code blocks."""
    fenced = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
        if m:
            yield i, m
