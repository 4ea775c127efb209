"""Launcher prefixes on the lines of multi-process runs (nccl-tests, perftest), shared by the "run" parsers.

Job launchers tag every line a process prints; the tags seen in real captures are::

    0: #  Rank  0 Group ...              srun -l (also " 0: " right-aligned, "12: ")
    [1,0]<stdout>: #  Rank ...           mpirun --tag-output (Open MPI)
    [0]      1048576   ...  -1[0]  ...   mpiexec -prepend-rank / -l (MPICH, Intel MPI): the tag is
                                         repeated inside the line before every printf fragment
    [default0]:host:pid:tid ...          torchrun --tee / --redirects
    [rank0]:...                          torchrun 2.x
    (RayWorkerWrapper pid=81, ip=10.0.0.2) ...   Ray workers

:func:`strip_launcher_prefix` removes one of them and names it, so a parser sees the line as the
program printed it. Line numbers are unchanged (the caller keeps its own numbering).
"""

from __future__ import annotations

import re

_SRUN_RE = re.compile(r"^\s*(\d{1,5}):(?: |$)")
_OMPI_RE = re.compile(r"^\[(\d+),(\d+)\]<(?:stdout|stderr)>:\s?")
_RANK_TAG_RE = re.compile(r"^\[(\d{1,5})\]")
_TORCHRUN_RE = re.compile(r"^\[(?:default|rank)(\d+)\]:")
_RAY_RE = re.compile(r"^\((?:[A-Za-z_][\w.]* )?pid=\d+(?:, ip=[0-9a-fA-F.:]+)?\)\s?")

SRUN = "srun -l"
OMPI = "mpirun --tag-output"
RANK_TAG = "rank tag [N]"
TORCHRUN = "torchrun"
RAY = "ray"


def strip_launcher_prefix(line: str) -> tuple[str, str | None]:
    """Return ``(line without its launcher tag, which launcher)``; ``(line, None)`` when untagged.

    The MPICH-style ``[N]`` tag is also removed where it recurs inside the line (replaced by a
    space, so ``-1[0]    1626.5`` reads ``-1     1626.5``). A line that is only a number and a
    colon (``"0:"``) is an empty tagged line.
    """
    if not line:
        return line, None
    first = line[0]
    if first == "[":
        m = _OMPI_RE.match(line)
        if m:
            return line[m.end():], OMPI
        m = _TORCHRUN_RE.match(line)
        if m:
            return line[m.end():], TORCHRUN
        m = _RANK_TAG_RE.match(line)
        if m:
            tag = m.group(0)
            rest = line[m.end():]
            if tag in rest:
                rest = rest.replace(tag, " ")
            return rest, RANK_TAG
        return line, None
    if first == "(":
        m = _RAY_RE.match(line)
        if m:
            return line[m.end():], RAY
        return line, None
    if first.isdecimal() or first == " ":
        m = _SRUN_RE.match(line)
        if m:
            return line[m.end():], SRUN
    return line, None
