"""ddlbench docs: the pages of docs/, from the install or the checkout."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.cli import invoke

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_lists_topics_and_prints_a_page():
    res = invoke(["docs"])
    assert res.exit_code == 0, res.output
    assert re.search(r"^cluster-profiles\s+Cluster profile reference$", res.stdout, re.M)
    pages = [*DOCS.glob("*.md"), *DOCS.glob("studies/*.md")]
    assert len(pages) == len(res.stdout.strip().splitlines()) - 2
    assert re.search(r"^studies/large-batch\s+The large-batch study", res.stdout, re.M)
    page = invoke(["docs", "spec.md"])
    assert page.exit_code == 0 and page.stdout == (DOCS / "spec.md").read_text()
    where = invoke(["docs", "failures", "--path"])
    assert Path(where.stdout.strip()) == (DOCS / "failures.md").resolve()
    # a study by its topic, its bare name or its path; a page of docs/ comes before a study
    for name, page in (
        ("studies/large-batch", "studies/large-batch.md"),
        ("large-batch", "studies/large-batch.md"),
        ("docs/studies/backup-workers.md", "studies/backup-workers.md"),
        ("backup-workers", "backup-workers.md"),
    ):
        where = invoke(["docs", name, "--path"])
        assert Path(where.stdout.strip()) == (DOCS / page).resolve(), (name, where.output)


def test_unknown_topic_is_an_input_error_with_a_suggestion():
    res = invoke(["docs", "clustr-profiles"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "did you mean 'cluster-profiles'" in res.stderr, res.output


def test_help_and_hints_name_topics_not_paths():
    """What a user reads (every command's --help, and the hints in the commands' messages)
    names `ddlbench docs TOPIC`, which an install has, never a docs/ path, which it has not."""
    from ddlbench.cli import _commands

    for name in sorted(_commands()):
        # click wraps the help text, also after a hyphen ("bad-" / "nodes")
        text = re.sub(r"-\n\s*", "-", invoke([name, "--help"]).stdout)
        assert not re.search(r"docs/[a-z-]+\.md", text.replace("print docs/", "")), name
        for m in re.finditer(r"ddlbench docs ([a-z-]+)", text):
            assert (DOCS / f"{m.group(1)}.md").is_file(), (name, m.group(0))
    for path in (DOCS.parent / "ddlbench" / "cli").glob("cmd_*.py"):
        for m in re.finditer(r"ddlbench docs ([a-z-]+)", path.read_text()):
            assert (DOCS / f"{m.group(1)}.md").is_file(), (path.name, m.group(0))


#: the packages whose strings reach a user on the command line (errors, warnings, hints)
MESSAGE_PACKAGES = ("spec", "plan", "cli", "execute", "campaign", "frameworks")


def _message_strings(path: Path):
    """The string constants of a module that are not docstrings (f-strings' parts too)."""
    import ast

    tree = ast.parse(path.read_text())
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            docs.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.lineno, node.value


def test_messages_name_topics_and_sections_that_exist():
    """A warning or error names `ddlbench docs TOPIC[#section]`, which an install can print,
    never a docs/ path; and the topic and section exist."""
    from ddlbench.cli.cmd_docs import _headings, _slug

    files = [p for pkg in MESSAGE_PACKAGES for p in (DOCS.parent / "ddlbench" / pkg).rglob("*.py")]
    files.append(DOCS.parent / "ddlbench" / "doctor.py")
    for path in files:
        for line, text in _message_strings(path):
            where = f"{path.relative_to(DOCS.parent)}:{line}"
            assert not re.search(r"docs/[a-z-]+\.md", text.replace("print docs/", "")), where
            for m in re.finditer(r"ddlbench docs ([a-z-]+)(?:#([\w-]+))?", text):
                page = DOCS / f"{m.group(1)}.md"
                assert page.is_file(), (where, m.group(0))
                if m.group(2):
                    lines = page.read_text().splitlines(keepends=True)
                    slugs = {_slug(h.group(2)) for _, h in _headings(lines)}
                    assert m.group(2) in slugs, (where, m.group(0))


def test_a_section_of_a_page():
    res = invoke(["docs", "spec#how-much-to-measure"])
    assert res.exit_code == 0 and res.stdout.startswith("## How much to measure\n")
    assert "\n## Frameworks" not in res.stdout  # up to the next heading of its level
    bad = invoke(["docs", "spec#how-much-to-meassure"])
    assert bad.exit_code == 2 and "did you mean 'how-much-to-measure'" in bad.stderr
