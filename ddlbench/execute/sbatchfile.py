"""Reading the ``#SBATCH`` lines of a rendered job script.

The local executor takes a job's shape, time limit and output files from them, exactly as
``sbatch`` would, and ``--array`` groups runs whose directives (all but names and output files)
are identical. Standard library only.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

# short options sbatch accepts in scripts, to their long names
_SHORT = {
    "-A": "--account",
    "-c": "--cpus-per-task",
    "-C": "--constraint",
    "-D": "--chdir",
    "-e": "--error",
    "-G": "--gpus",
    "-J": "--job-name",
    "-N": "--nodes",
    "-n": "--ntasks",
    "-o": "--output",
    "-p": "--partition",
    "-q": "--qos",
    "-t": "--time",
    "-w": "--nodelist",
    "-x": "--exclude",
    "-a": "--array",
}
# directives that name or place a job rather than shape it: not part of an array group's key
NAMING = frozenset({"--job-name", "--output", "--error", "--comment", "--array", "--chdir"})


def directives(text: str) -> List[Tuple[str, Optional[str]]]:
    """``(option, value)`` pairs from the ``#SBATCH`` block, as sbatch reads it.

    Like sbatch, reading stops at the first line that is neither blank nor a comment.
    """
    out: List[Tuple[str, Optional[str]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if not line.startswith("#"):
            break
        if not line.startswith("#SBATCH"):
            continue
        body = line[len("#SBATCH") :]
        if body and not body[0].isspace():
            continue
        body = body.split(" #", 1)[0]
        try:
            words = shlex.split(body)
        except ValueError:
            words = body.split()
        i = 0
        while i < len(words):
            word = words[i]
            i += 1
            if word.startswith("--"):
                name, eq, value = word.partition("=")
                out.append((name, value if eq else None))
            elif word.startswith("-") and len(word) >= 2:
                name = _SHORT.get(word[:2], word[:2])
                if len(word) > 2:
                    out.append((name, word[2:].lstrip("=")))
                elif i < len(words) and not words[i].startswith("-"):
                    out.append((name, words[i]))
                    i += 1
                else:
                    out.append((name, None))
    return out


def parse_time_seconds(value: str) -> Optional[float]:
    """Seconds in a Slurm time limit (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``);
    ``None`` for UNLIMITED/INFINITE."""
    text = str(value).strip()
    if text.upper() in ("UNLIMITED", "INFINITE", "-1"):
        return None
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
        parts = [int(p) for p in text.split(":")]
        while len(parts) < 3:
            parts.append(0)
        h, m, s = parts
        return float(days * 86400 + h * 3600 + m * 60 + s)
    parts = [int(p) for p in text.split(":")]
    if len(parts) == 1:
        return float(parts[0] * 60)
    if len(parts) == 2:
        return float(parts[0] * 60 + parts[1])
    if len(parts) == 3:
        return float(parts[0] * 3600 + parts[1] * 60 + parts[2])
    raise ValueError(f"time limit {value!r} is not a Slurm time")


@dataclass
class JobScript:
    path: Path
    options: List[Tuple[str, Optional[str]]] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> JobScript:
        path = Path(path)
        return cls(path=path, options=directives(path.read_text(errors="replace")))

    def get(self, name: str) -> Optional[str]:
        value = None
        for opt, val in self.options:
            if opt == name:
                value = val if val is not None else ""
        return value

    def get_int(self, name: str) -> Optional[int]:
        value = self.get(name)
        if not value:
            return None
        m = re.match(r"^(\d+)", value)
        return int(m.group(1)) if m else None

    @property
    def job_name(self) -> Optional[str]:
        return self.get("--job-name")

    @property
    def time_limit_s(self) -> Optional[float]:
        value = self.get("--time")
        return parse_time_seconds(value) if value else None

    def shape_key(self) -> Tuple[Tuple[str, str], ...]:
        """What must be equal for two runs to share a job array."""
        seen: Dict[str, str] = {}
        for opt, val in self.options:
            if opt not in NAMING:
                seen[opt] = "" if val is None else val
        return tuple(sorted(seen.items()))


_PAT = re.compile(r"%(\d*)([AaJjNnstuxX%])")


def expand_pattern(
    pattern: str,
    *,
    job_id: str,
    job_name: str,
    user: Optional[str] = None,
    node: str = "",
    array_job_id: str = "",
    array_task_id: str = "",
) -> str:
    """Slurm's filename pattern (``--output``): %j %J %x %u %N %n %A %a %s %t %%."""
    user = user or os.environ.get("USER") or ""

    def repl(m: re.Match[str]) -> str:
        width, key = m.group(1), m.group(2)
        value = {
            "j": job_id,
            "J": job_id,
            "x": job_name,
            "u": user,
            "N": node,
            "n": "0",
            "A": array_job_id or job_id,
            "a": array_task_id or "4294967294",
            "s": "batch",
            "t": "0",
            "%": "%",
        }.get(key, m.group(0))
        if width and value.isdigit():
            value = value.zfill(int(width))
        return value

    return _PAT.sub(repl, pattern)


def pattern_to_shell(pattern: str) -> str:
    """A shell word that expands like Slurm's filename pattern, for a job array's task body."""
    pieces: List[str] = []
    last = 0
    for m in _PAT.finditer(pattern):
        if m.start() > last:
            pieces.append(shlex.quote(pattern[last : m.start()]))
        key = m.group(2)
        pieces.append(
            {
                "j": '"${SLURM_JOB_ID}"',
                "J": '"${SLURM_JOB_ID}"',
                "x": '"${SLURM_JOB_NAME}"',
                "u": '"${USER:-}"',
                "N": '"$(hostname -s)"',
                "n": "0",
                "A": '"${SLURM_ARRAY_JOB_ID}"',
                "a": '"${SLURM_ARRAY_TASK_ID}"',
                "s": "batch",
                "t": "0",
                "%": "%",
            }.get(key, shlex.quote(m.group(0)))
        )
        last = m.end()
    if last < len(pattern):
        pieces.append(shlex.quote(pattern[last:]))
    return "".join(pieces) or "''"
