"""NVLink / NVSwitch rules N01-N05 of domain.md section 1b.

Inputs: the document's ``gpu_pairs`` classes (``NV#`` counts) and ``summary`` (GPU model,
NVSwitch), raw ``nvidia_smi_p2p`` tokens (N02), ``nvidia_smi_nvlink`` per-link rates (N01, N05),
``nvidia_smi_q`` Fabric State/Status (N03) and ``nvidia_smi_nvlink_errors`` per-link error
counters (N05's "check link errors", read when sent).
"""

from __future__ import annotations

from collections.abc import Mapping

from apps.domain.findings.base import (
    Ctx, Rule, as_float, as_int, as_list, finding, gpu_sort_key, join, nv_count, section_gpus,
)
from apps.domain.findings.pcie import P2P_TOKENS, p2p_gaps

N01 = Rule("N01", "NVLink degraded / missing", "HIGH",
           "Check nvidia-smi nvlink -s and -e and the fabric manager; reseat or RMA the GPU/baseboard, and "
           "exclude the GPU from jobs until fixed.",
           "stas00 NVLink table [S31]; realdata NV12/NV18 samples; vllm #16336 (B200 GPU2 at NODE) [S56]")
N02 = Rule("N02", "NVLink pair with P2P disabled", "CRIT",
           "Fix the hardware or driver; only as a last resort set NCCL_IGNORE_DISABLED_P2P=1.",
           "paths.cc L396 WARN 'P2P is disabled between NVLINK connected GPUs' [S2]")
N03 = Rule("N03", "NVSwitch fabric not initialised", "CRIT",
           "Install and start the nvidia-fabricmanager package of exactly the driver's version (systemctl status "
           "nvidia-fabricmanager; its log says why it stopped), then check that nvidia-smi -q shows Fabric State "
           "Completed and Status Success on every GPU before starting jobs.",
           "pytorch #35710, aws-samples #33, gpu-burn #133 [S55]")
N04 = Rule("N04", "Partial NVLink mesh (no switch)", "INFO",
           "Nothing to fix: expected on cube-mesh and bridged boards. Group tightly-coupled ranks on NVLink "
           "neighbours; NCCL_NVB_DISABLE=1 only for debugging.",
           "realdata vastai_8xv100_sxm2_hybridcube, microway_dgx1_v100; graph.h PATH_NVB [S4]; env NCCL_NVB_DISABLE [S12]")
N05 = Rule("N05", "NVLink speed lower than generation norm", "MED",
           "Check link errors (nvidia-smi nvlink -e) and reseat.",
           "stas00 footnote on nvlink -s [S31]; realdata/nvlink samples")

# raw per-link rate printed by nvidia-smi nvlink -s (domain.md 1b N05 and 2.2), by GPU family
_RAW_NORM = {"V100": 25.781, "A100": 25.0, "A800": 25.0, "H100": 26.5625, "H200": 26.5625, "H20": 26.5625,
             "H800": 26.5625, "B200": 53.125, "B300": 53.125, "GA10x": 14.0625}


def _info(ctx: Ctx):
    try:
        from apps.domain.bandwidth import gpu_generation
    except ImportError:  # pragma: no cover
        return None
    return gpu_generation(ctx.gpu_model())


def _nvlink_gpus(ctx: Ctx) -> list[dict]:
    return [g for g in as_list((ctx.results.get("nvidia_smi_nvlink") or {}).get("gpus")) if isinstance(g, Mapping)]


def _gpu_label(g: Mapping) -> str:
    idx = as_int(g.get("index"))
    return f"GPU{idx}" if idx is not None else str(g.get("name") or "GPU?")


def _link_active(link: Mapping) -> bool:
    if link.get("active") is not None:
        return bool(link["active"])
    return as_float(link.get("gbps")) is not None


def rule_n01(ctx: Ctx) -> list[dict]:
    """N01 NVLink degraded / missing.

    Condition (NVSwitch boards only): a GPU pair shows fewer NVLinks than the platform norm (A100 HGX
    NV12; H100/H200/B200/B300 NV18; else the most common NV#), or a PCIe token (PHB/NODE/SYS...)
    instead of NV#; or ``nvidia-smi nvlink -s`` shows fewer active links than the norm. CRIT when a
    GPU has no NVLink to any peer (it fell off the fabric), else HIGH. Source: [S31]; vllm #16336 [S56].
    """
    out = []
    names = ctx.gpu_names
    if ctx.nvswitch_board() and len(names) >= 2:
        counts = list(ctx.nv_pairs().values())
        norm = ctx.nvswitch_norm() or (max(set(counts), key=counts.count) if counts else None)
        if norm:
            bad: dict[str, list[tuple[str, str]]] = {g: [] for g in names}
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    cls = ctx.pair_class(a, b)
                    if not cls:
                        continue
                    c = nv_count(cls)
                    if c is None or c < norm:
                        bad[a].append((b, cls))
                        bad[b].append((a, cls))
            peers = len(names) - 1
            # a GPU is the culprit when most of its pairs are bad; otherwise blame both ends of each bad pair
            culprits = [g for g in names if len(bad[g]) * 2 > peers]
            reported: set[str] = set()
            for g in culprits:
                tokens = sorted({cls for _, cls in bad[g]})
                no_nv = all(nv_count(cls) is None for _, cls in bad[g]) and len(bad[g]) == peers
                sev = "CRIT" if no_nv else "HIGH"
                msg = (f"{g} shows {join(tokens, 'or')} to {len(bad[g])} of its {peers} peers where this NVSwitch board "
                       f"should show NV{norm} everywhere. " +
                       ("It has fallen off the NVLink fabric: every ring through it runs at PCIe speed."
                        if no_nv else "Some of its NVLinks are down, so every channel through it is slower."))
                out.append(finding(N01, [g], msg, severity=sev))
                reported.add(g)
            for a in names:
                for b, cls in bad[a]:
                    if a in reported or b in reported or gpu_sort_key(a) > gpu_sort_key(b):
                        continue
                    msg = (f"{a}-{b} shows {cls} where this NVSwitch board should show NV{norm} for every pair; "
                           "links between them are missing.")
                    out.append(finding(N01, [a, b], msg))
    out += _missing_board_gpus(ctx)
    # active link count from nvidia-smi nvlink -s
    info = _info(ctx)
    rows = _nvlink_gpus(ctx)
    if rows:
        actives = {_gpu_label(g): sum(1 for link in as_list(g.get("links")) if isinstance(link, Mapping)
                                      and _link_active(link)) for g in rows}
        expected = max(actives.values())
        if ctx.nvswitch_board() and info and info.nvlink_links:
            expected = max(expected, info.nvlink_links)
        already = {d for f in out for d in f["devices"]}
        for g, n in sorted(actives.items(), key=lambda kv: gpu_sort_key(kv[0])):
            if n < expected and g not in already:
                sev = "CRIT" if n == 0 else "HIGH"
                msg = (f"nvidia-smi nvlink -s shows {n} active NVLink(s) on {g}; this GPU model should have "
                       f"{expected}. Its NVLink bandwidth is cut to {n}/{expected}.")
                out.append(finding(N01, [g], msg, severity=sev))
    return out


def _missing_board_gpus(ctx: Ctx) -> list[dict]:
    """An NVSwitch baseboard (HGX/DGX: 4 or 8 SXM GPUs) showing 5 to 7 GPUs: some are gone from the
    PCI bus (fallen off, disabled) or were not given to this container."""
    names = ctx.gpu_names
    if not (5 <= len(names) <= 7) or not ctx.nvswitch_board():
        return []
    missing = 8 - len(names)
    by_numa: dict[int, list[str]] = {}
    for g in ctx.gpus:
        if as_int(g.get("numa")) is not None:
            by_numa.setdefault(as_int(g["numa"]), []).append(g["name"])
    side = ""
    if len(by_numa) == 2 and len(names) == sum(len(v) for v in by_numa.values()):
        short = [(n, v) for n, v in sorted(by_numa.items()) if len(v) < 4]
        if len(short) == 1:
            numa, gpus = short[0]
            side = (f" NUMA {numa} holds {len(gpus)} GPUs ({join(gpus)}) where the board puts 4 per CPU, so the "
                    f"missing one{'s' if missing > 1 else ''} sat on that side.")
    msg = (f"{len(names)} GPUs on an NVSwitch baseboard, which carries 8 SXM GPUs: {missing} "
           f"{'is' if missing == 1 else 'are'} missing from the PCI bus (fallen off the bus, disabled, or not "
           f"given to this container).{side} Jobs sized for 8 GPUs per node cannot start, and rings of 7 are "
           "slower than the board's 8.")
    return [finding(N01, names, msg, title="GPU missing from an NVSwitch board",
                    fix="Check dmesg for Xid 79 ('GPU has fallen off the bus') and nvidia-smi -q; reseat or RMA the "
                        "GPU or baseboard; drain the node until all 8 GPUs are back.")]


def rule_n02(ctx: Ctx) -> list[dict]:
    """N02 NVLink pair with P2P disabled.

    Condition: topo -m shows NV# for the pair and ``nvidia-smi topo -p2p`` is not OK. CRIT: NCCL
    aborts ("P2P is disabled between NVLINK connected GPUs"). Source: paths.cc L396 [S2].
    """
    out = []
    for a, b, tok in p2p_gaps(ctx):
        cls = ctx.pair_class(a, b)
        if nv_count(cls) is None:
            continue
        msg = (f"{a} and {b} are connected by NVLink ({cls}) but the driver reports peer-to-peer {tok} "
               f"({P2P_TOKENS.get(tok, tok)}). NCCL treats this as a hardware problem and aborts with "
               "'P2P is disabled between NVLINK connected GPUs'.")
        out.append(finding(N02, [a, b], msg))
    return out


_FABRIC_NONE = ("n/a", "not supported")  # no NVSwitch fabric behind this GPU


def rule_n03(ctx: Ctx) -> list[dict]:
    """N03 NVSwitch fabric not initialised.

    Condition (``nvidia-smi -q``): a GPU reports a Fabric State (so it sits on an NVSwitch fabric:
    PCIe GPUs print N/A) other than ``Completed``, or a Fabric Status other than ``Success``. CRIT:
    CUDA cannot initialise on it until the fabric manager has programmed the NVSwitches. A GPU
    without a Fabric section (older drivers, partial captures) or with N/A is not judged.
    Source: pytorch #35710, aws-samples #33, gpu-burn #133 [S55].
    """
    bad: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for label, g in section_gpus(ctx, "nvidia_smi_q"):
        fab = g.get("fabric") if isinstance(g.get("fabric"), Mapping) else {}
        state, status = fab.get("state"), fab.get("status")
        if not state or str(state).strip().lower() in _FABRIC_NONE:
            continue
        if str(state).lower() == "completed" and (not status or str(status).lower() == "success"):
            continue
        bad.setdefault((str(state), str(status or "N/A")), []).append((label, fab))
    out = []
    for (state, status), rows in bad.items():
        names = sorted((label for label, _ in rows), key=gpu_sort_key)
        first = rows[0][1]  # NVLink5 multi-node domains: the clique and cluster of the first GPU
        where = ", ".join(f"{word} {first[key]}" for word, key in (("clique", "clique_id"), ("cluster", "cluster_uuid"))
                          if first.get(key))
        why = (" The fabric manager is still training the NVSwitch links: right after boot this clears within "
               "minutes; if it stays, the fabric manager is stuck or missing." if state.lower() == "in progress"
               else " The fabric manager has not started (or not finished) programming the NVSwitches."
               if state.lower() in ("not started", "not_started") else
               " The fabric manager finished with an error: its log names the NVSwitch or link that failed."
               if state.lower() == "completed" else "")
        msg = (f"nvidia-smi -q reports NVSwitch fabric State '{state}', Status '{status}' on {join(names)}"
               + (f" ({where})" if where else "") + "; a healthy NVSwitch system shows Completed / Success. Until "
               "then CUDA cannot initialise on these GPUs (CUDA error 802 'system not yet initialized') and NCCL "
               "jobs fail at start." + why)
        out.append(finding(N03, names, msg))
    return out


def rule_n04(ctx: Ctx) -> list[dict]:
    """N04 Partial NVLink mesh (no switch).

    Condition: some GPU pairs have NVLink and others do not, on a board without NVSwitch (DGX-1
    hybrid cube mesh, NVLink bridges on PCIe cards). INFO: expected; NCCL routes through an
    intermediate GPU (NVB). Source: realdata cube-mesh samples; graph.h PATH_NVB [S4].
    """
    names = ctx.gpu_names
    nv = ctx.nv_pairs()
    if not nv or ctx.nvswitch_board():
        return []
    missing = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if frozenset((a, b)) not in nv and ctx.pair_class(a, b):
                missing.append((a, b, ctx.pair_class(a, b)))
    if not missing:
        return []
    gpus = sorted({g for a, b, _ in missing for g in (a, b)}, key=gpu_sort_key)
    shown = ", ".join(f"{a}-{b} ({c})" for a, b, c in missing[:16])
    more = f" and {len(missing) - 16} more" if len(missing) > 16 else ""
    msg = (f"This board has no NVSwitch: {len(nv)} GPU pairs are NVLink-connected and {len(missing)} are PCIe-only: "
           f"{shown}{more}. That is expected on cube-mesh and bridged boards; NCCL builds rings over the NVLinks and "
           "can relay through an intermediate GPU.")
    return [finding(N04, gpus, msg)]


def rule_n05(ctx: Ctx) -> list[dict]:
    """N05 NVLink speed lower than generation norm.

    Condition: an active link in ``nvidia-smi nvlink -s`` runs below the generation's raw rate
    (V100 25.781, A100 25, H100 26.5625, B200/B300 53.125 GB/s) or below the fastest link of the node.
    MED. Source: stas00 nvlink -s footnote [S31]; realdata/nvlink.

    The rule's fix is "check link errors (nvidia-smi nvlink -e)": when that section is sent, a link
    with replay, recovery or CRC errors is one MED finding per GPU ("NVLink link errors"): the link
    retransmits or retrains, and every channel through it slows or stalls. Counters run from driver
    load, so one sample cannot say when the errors happened.
    """
    return _slow_links(ctx) + _link_errors(ctx)


def _slow_links(ctx: Ctx) -> list[dict]:
    rows = _nvlink_gpus(ctx)
    if not rows:
        return []
    info = _info(ctx)
    rates = [as_float(link.get("gbps")) for g in rows for link in as_list(g.get("links"))
             if isinstance(link, Mapping) and _link_active(link)]
    rates = [r for r in rates if r]
    if not rates:
        return []
    norm = _RAW_NORM.get(info.family) if info and info.family else None
    norm = norm or max(rates)
    out = []
    for g in rows:
        slow = [(as_int(link.get("link")), as_float(link.get("gbps"))) for link in as_list(g.get("links"))
                if isinstance(link, Mapping) and _link_active(link) and as_float(link.get("gbps"))
                and as_float(link.get("gbps")) < norm * 0.98]
        if not slow:
            continue
        label = _gpu_label(g)
        links = ", ".join(f"link {n} at {r:g} GB/s" for n, r in slow)
        msg = (f"{label}: {links}, below the {norm:g} GB/s per link (raw rate as nvlink -s prints it) of its "
               "other links/generation. A slower link bounds every channel through it.")
        out.append(finding(N05, [label], msg))
    return out


_ERROR_WORDS = (("replay_errors", "replay"), ("recovery_errors", "recovery"), ("crc_errors", "CRC"))


def _link_errors(ctx: Ctx) -> list[dict]:
    """N05's "check link errors": links with replay/recovery/CRC errors in ``nvidia-smi nvlink -e``."""
    out = []
    for g in as_list((ctx.results.get("nvidia_smi_nvlink_errors") or {}).get("gpus")):
        if not isinstance(g, Mapping):
            continue
        label = _gpu_label(g)
        parts = []
        for link in as_list(g.get("links")):
            if not isinstance(link, Mapping):
                continue
            counts = [(word, as_int(link.get(key))) for key, word in _ERROR_WORDS]
            counts = [(w, n) for w, n in counts if n]
            if counts:
                parts.append(f"link {as_int(link.get('link'))}: " + ", ".join(f"{n} {w}" for w, n in counts))
        if not parts:
            continue
        msg = (f"{label} has NVLink errors in nvidia-smi nvlink -e ({'; '.join(parts)}). Replays are link-level "
               "retransmissions after CRC errors, recoveries are link retrainings: a link that keeps counting "
               "slows (or stalls) every NCCL channel through it. The counters run from driver load; read them again "
               "after a job to see whether they still rise.")
        out.append(finding(N05, [label], msg, title="NVLink link errors",
                           fix="Read nvidia-smi nvlink -e again after a job: if the counts rise, reseat the GPU or "
                               "baseboard, or RMA it; drain the GPU meanwhile."))
    return out


RULES = [rule_n01, rule_n02, rule_n03, rule_n04, rule_n05]
