"""No function in ddlbench/workloads/ is longer than 60 lines.

Lines are counted with ``ast``: from the ``def`` line to the function's last line
(decorators excluded, nested functions and classes included in their parent and also
counted on their own). The rest of the package has its own guard in
tests/test_function_length.py.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import List

WORKLOADS = Path(__file__).resolve().parents[2] / "ddlbench" / "workloads"
MAX_LINES = 60


def long_functions(root: Path, limit: int = MAX_LINES) -> List[str]:
    """``file:line name (N lines)`` for every function under ``root`` longer than ``limit``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    where = path.relative_to(root.parents[1])
                    found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_workload_function_exceeds_60_lines():
    offenders = long_functions(WORKLOADS)
    assert not offenders, (
        f"functions in ddlbench/workloads/ longer than {MAX_LINES} lines (split them):\n"
        + "\n".join(offenders)
    )


def test_the_guard_finds_a_long_function(tmp_path):
    pkg = tmp_path / "ddlbench" / "workloads"
    pkg.mkdir(parents=True)
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    (pkg / "long.py").write_text("def short():\n    pass\n\n\ndef long():\n" + body)
    assert long_functions(pkg) == [f"ddlbench/workloads/long.py:5 long ({MAX_LINES + 1} lines)"]
