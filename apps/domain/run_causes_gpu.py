"""Run causes inside a host: P2P only between some GPU pairs (T5) and GeForce cards whose driver
disables P2P (R03)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping

from apps.domain.run_facts import RunFacts, finding

__all__ = ["rule_r03", "rule_t5"]


def _models(facts: RunFacts) -> set[str]:
    models = {str(r.get("model") or "") for r in facts.parsed.get("ranks") or []}
    models |= {str(d.get("name") or "") for d in facts.parsed.get("devices") or []}
    for h in facts.known():
        models.add(str((facts.doc(h["host"]).get("summary") or {}).get("gpu_model") or ""))
    return {m for m in models if m}


def rule_r03(facts: RunFacts) -> list[dict]:
    """GeForce GPUs: NVIDIA's driver disables PCIe P2P on them, so NCCL copies through host memory."""
    geforce = sorted(m for m in _models(facts) if re.search(r"GeForce|\bRTX [2-5]0[5-9]0\b", m, re.I))
    if not geforce:
        return []
    ev = [facts.cite(r["line_no"], f"{r.get('model')}: a GeForce card", "R03")
          for r in (facts.parsed.get("ranks") or [])[:1]]
    shm = [c for c in (facts.log or {}).get("connections") or [] if c.get("transport") == "SHM"]
    ev += [facts.cite(c["line_no"], "GPU to GPU through host memory (SHM), not P2P", "R03") for c in shm[:2]]
    layout = [f for h in facts.known() for f in facts.layout_findings(h["host"], ("H03", "P01", "P02", "P03"))]
    return [finding("R03", "MED", "GeForce: P2P disabled, copies through host memory",
                    f"{', '.join(geforce)}: NVIDIA's driver disables PCIe peer-to-peer on GeForce cards, so NCCL "
                    "moves GPU-to-GPU data through host memory (SHM) whatever NCCL_P2P_LEVEL says.",
                    "Expect SHM figures on these cards; an NVLink bridge restores P2P between its two GPUs; data-"
                    "centre GPUs have P2P.", ev, layout=layout)]


def rule_t5(facts: RunFacts) -> list[dict]:
    """P2P only between some GPU pairs: a P2P test's pairs far below the layout, or SHM beside P2P."""
    if facts.kind == "p2p_bandwidth":
        slow = [p for p in facts.pairs if p["efficiency"] is not None and p["efficiency"] < 0.5]
        if not slow:
            return []
        ev = [facts.cite(p["line"], f"{p['a']} -> {p['b']}: {p['measured_gbs']:.1f} GB/s, "
                         f"{p['efficiency']:.0%} of the layout's {p['expected_gbs']:.1f} GB/s", "T5")
              for p in slow[:3]]
        layout = [f for h in facts.known() for f in facts.layout_findings(h["host"], ("P01", "P02", "P03", "P04"))]
        return [finding("T5", "HIGH", "P2P slow for some GPU pairs",
                        f"{len(slow)} GPU pair(s) copy at under half the layout's figure: P2P is off or detoured for "
                        "them (ACS redirect, SYS/PHB pairs, a disabled peer mapping).",
                        "Place ranks so heavy pairs share NVLink/PXB; check ACSCtl on the switch ports (P04) and "
                        "nvidia-smi topo -p2p r.", ev, layout=layout)]
    by_host: dict[str | None, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for c in (facts.log or {}).get("connections") or []:
        if c.get("transport") in ("P2P", "SHM"):
            by_host[c.get("host")][c["transport"]].append(c)
    out = []
    for host, kinds in by_host.items():
        if not (kinds.get("P2P") and kinds.get("SHM")):
            continue
        shm = kinds["SHM"]
        pairs = [(facts.gpu_of(host, c.get("src_dev")), facts.gpu_of(host, c.get("dst_dev"))) for c in shm]
        layout_p2p = [a + "-" + b for a, b in pairs if a and b and _pair_p2p(facts.doc(host), a, b)]
        ev = [facts.cite(c["line_no"], "this pair meets through host memory (SHM) while others use P2P", "T5")
              for c in shm[:2]]
        if layout_p2p:
            out.append(finding("T5", "HIGH", "SHM where the layout has P2P",
                               f"{host}: {', '.join(sorted(set(layout_p2p))[:3])} copy through host memory (SHM) "
                               "although the layout gives them peer-to-peer: NCCL_P2P_DISABLE or NCCL_P2P_LEVEL, or a "
                               "container that hides the other GPUs from each process.",
                               "Unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL; give every process all the node's GPUs "
                               "(CUDA_VISIBLE_DEVICES, the container's device list) and pick one with LOCAL_RANK.",
                               ev, hosts=[host]))
            continue
        out.append(finding("T5", "MED", "P2P only between some GPU pairs",
                           f"{host}: {len(shm)} connection(s) via SHM next to {len(kinds['P2P'])} via P2P: the "
                           "topology is asymmetric (some pairs only meet at PHB/SYS).",
                           "Group ranks so heavy pairs share NVLink or a PCIe switch (the host page's GPU groups).",
                           ev, hosts=[host], layout=facts.layout_findings(host, ("P01", "P02", "P03"))))
    return out


def _pair_p2p(doc: Mapping, a: str, b: str) -> bool:
    """Whether the layout gives GPUs ``a`` and ``b`` peer-to-peer (NVLink or PCIe P2P)."""
    return any({p.get("a"), p.get("b")} == {a, b} and p.get("p2p") for p in doc.get("gpu_pairs") or [])
