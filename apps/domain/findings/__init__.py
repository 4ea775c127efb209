"""Diagnosis rules: ``evaluate(doc, results)`` turns one host's snapshot document into findings.

``doc`` is the snapshot document of ``apps/domain/analysis.py`` without its ``findings`` key;
``results`` maps a section kind (``nvidia_smi_p2p``, ``lspci_verbose``, ``nvidia_smi_nvlink``,
``ibstat``, ``nvidia_smi_gpus``, ``nvidia_smi_q``, ``show_gids``, ``ib_counters``, ``nccl_env`` ...) to
that parser's result, for the raw details the document does not keep (P2P tokens, ACSCtl flags,
per-link NVLink rates and errors, LIDs, GIDs, port counters, fabric state, pstate, NCCL env).

The rules are those of ``/work/shared/docs/domain.md`` section 1, one module per family:
``pcie`` (P01-P12), ``nvlink`` (N01-N05), ``gdr`` (G01-G06), ``fabric`` (F01-F07, F09), ``host``
(H01-H07, X01 "sources disagree" and X02 "device name unsafe in a shell", topoweb's own rules
beside domain.md's). F08 and H08 compare several nodes and live in ``apps/domain/fleet_rules.py``
(``evaluate_fleet``), outside ``rule_ids()``. Each finding is
``{"rule", "severity", "title", "devices", "message", "fix", "source"}``; the list is sorted by
severity (CRIT, HIGH, MED, LOW, INFO) then rule id then devices.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apps.domain.findings import fabric, gdr, host, nvlink, pcie
from apps.domain.findings.base import SEVERITIES, SEVERITY_RANK, Ctx, gpu_sort_key

__all__ = ["evaluate", "ALL_RULES", "SEVERITIES", "rule_ids"]

ALL_RULES = pcie.RULES + nvlink.RULES + gdr.RULES + fabric.RULES + host.RULES


def rule_ids() -> list[str]:
    """The rule ids topoweb evaluates on one host (``P01`` ... ``X02``; the fleet rules F08 and H08 are
    ``apps.domain.fleet_rules.FLEET_RULE_IDS``)."""
    return sorted({fn.__name__.split("_", 1)[1].upper() for fn in ALL_RULES})


def evaluate(doc: Mapping[str, Any], results: Mapping[str, Any] | None = None, *, strict: bool = False,
             plain: bool = False) -> list[dict]:
    """Evaluate every rule on one host.

    A rule whose inputs are missing returns nothing. A rule that fails on unexpected input is
    skipped (``strict=True`` re-raises, for tests) so one odd section never hides the others.
    ``plain=True``: ``results`` are already ``to_jsonable`` output (as ``analyze_host`` keeps
    them) and are read as they are, not converted again.
    """
    ctx = Ctx(doc, results, plain=plain)
    out: list[dict] = []
    for rule in ALL_RULES:
        try:
            out.extend(rule(ctx))
        except Exception:
            if strict:
                raise
    out.sort(key=lambda f: (SEVERITY_RANK[f["severity"]], f["rule"], [gpu_sort_key(d) for d in f["devices"]]))
    return out
