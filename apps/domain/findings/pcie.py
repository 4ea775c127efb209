"""PCIe fabric rules P01-P12 of domain.md section 1a (GPU<->GPU paths, ACS, link training, sharing, chipset).

Inputs: the document's ``gpu_pairs`` (topo -m class per pair), ``graph`` PCIe edges (gen/width vs
capability), ``contention``; raw ``nvidia_smi_p2p`` tokens, ``lspci_verbose`` ACSCtl and LnkSta/LnkCap,
``nvidia_smi_gpus`` pstate and link generations; device names and parents of ``lspci_tree``,
``hwloc_xml``, ``sysfs_pci`` and ``lspci_verbose`` (P12).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from apps.domain.bandwidth import pcie_link
from apps.domain.parsers.host_info import iommu_words, is_passthrough
from apps.domain.pci import pcie_generation
from apps.domain.findings.base import (
    Ctx, Rule, as_float, as_int, as_list, finding, fmt_gbs, fmt_num, get, gpu_sort_key, join, normalize_token,
    nv_count,
)

P01 = Rule("P01", "GPU pair across sockets", "MED",
           "Keep tensor-parallel groups on one socket and bind ranks to the GPU-local NUMA node; only on a "
           "platform known to be good, test NCCL_P2P_LEVEL=SYS.",
           "paths.cc L356-365 (p2pLevel = PATH_PXB) [S2]; topo.h QPI/AMD constants [S1]; env doc NCCL_P2P_LEVEL [S12]")
P02 = Rule("P02", "GPU pair through a CPU host bridge", "MED",
           "Expect SHM for these pairs; try NCCL_P2P_LEVEL=PHB only after p2pBandwidthLatencyTest shows healthy P2P.",
           "paths.cc L356-362 (v2.30; changed in 2.23) vs v2.21.5 L279-295 [S2]; topo.h INTEL_P2P_OVERHEAD, "
           "search.cc L90 [S1][S5]")
P03 = Rule("P03", "P2P capability gap", "HIGH",
           "For CNS/TNS check ACS (P04): run sudo lspci -vvv and read the ACSCtl: line of every PCIe switch "
           "and root port between the two GPUs (ReqRedir+ or CmpltRedir+ means peer traffic is redirected to "
           "the root complex; quick check: sudo lspci -vvv | grep ACSCtl | grep SrcValid+), then the IOMMU "
           "(P05); GNS is a hardware limit of the GPU model; DR means P2P was disabled by a driver registry key.",
           "NCCL GPU troubleshooting (topo -p2p, OK matrix) [S14]; paths.cc L373-411 (NVML p2pStatusRead/Write) [S2]; "
           "nvidia-smi topo -p2p legend incl. DR [S28]")
P04 = Rule("P04", "ACS redirect on the P2P path", "CRIT",
           "Check with sudo lspci -vvv: the ACSCtl: line of each switch/root port listed must not show ReqRedir+ "
           "or CmpltRedir+ (NCCL's quick check: sudo lspci -vvv | grep ACSCtl | grep SrcValid+). Disable ACS in "
           "the BIOS or per boot with setpci -s <bdf> ECAP_ACS+0x6.w=0000 on the switch/root ports listed (NCCL "
           "troubleshooting loop). In a VM keep ACS on and enable ATS on the NIC instead.",
           "NCCL troubleshooting ACS [S13]; net_ib/common.h L616 [S11]; NCCL issues #2079, #606, #304, #667, #700 "
           "[S33][S34][S35][S36][S44]; VM ATS/ACS appendix [S64]")
P05 = Rule("P05", "IOMMU translating on bare metal", "HIGH",
           "Boot with iommu=pt (or disable VT-d/AMD-Vi on dedicated bare-metal nodes); re-check ACS (P04).",
           "NCCL troubleshooting (IO virtualization can redirect P2P) [S13]; NCCL #257, nccl-tests #115 "
           "[S37][S38]; kernel ABI iommu_groups/type [S27]")
P06 = Rule("P06", "PCIe link width downtrained", "HIGH",
           "Reseat or replace the riser/cable, check BIOS bifurcation; compare with the parent port's capability "
           "before blaming the card.",
           "pciutils link_compare() (commit 9f76812, 2022-01) [S25]; kernel sysfs link attributes commit 56c1af4 [S26]")
P07 = Rule("P07", "PCIe link speed downgraded", "HIGH",
           "Re-sample under load (for example during nccl-tests); if the link stays low: BIOS PCIe generation "
           "setting, riser/retimer, reseat.",
           "nvidia-smi help: gpucurrent may be reduced when the GPU is not in use [S29]; pstate/gen table "
           "(open-gpu-kernel-modules #731) [S51]; hwloc #653 [S52]; realdata/lspci_vvv")
P08 = Rule("P08", "Platform caps the device", "LOW",
           "Accept the lower ceiling, or move the card to a slot of its own generation; topoweb uses the trained "
           "link in its bandwidth model.",
           "nvidia-smi help (hostmax, gen.max possible with this GPU and system) [S29]; xml.cc L682-718 [S7]")
P09 = Rule("P09", "Shared switch uplink oversubscribed", "MED",
           "Prefer GPUDirect/P2P-local placements (GPU and NIC on the same switch), spread jobs across switches, "
           "avoid staging through host memory.",
           "topo.cc L649-699 (per-link bw = width*speed/80) [S3]; search.cc followPath L81-121 [S5]; NCCL #412 [S43]")
P10 = Rule("P10", "Shared root port / root complex", "MED",
           "Balance GPUs and NICs across root ports; prefer GPUDirect RDMA so traffic stays below the root port.",
           "Derived from topo.cc [S3] and search.cc [S5]")
P11 = Rule("P11", "Multi-NIC on a PCIe-only box", "INFO",
           "Set expectations: size the model with one NIC path per ring; extra NICs mostly help all-to-all.",
           "sjeaugey in NCCL #412 [S43]")
P12 = Rule("P12", "Chipset-attached GPU", "MED",
           "Use CPU-attached slots for all GPUs of a job (the board manual says which slots hang off the chipset); "
           "leave chipset slots to NVMe, network and USB devices.",
           "club-3090 measurements (secondary, PR #895) [S71]")

P2P_TOKENS = {
    "CNS": "chipset not supported (chipset, ACS or IOMMU)",
    "GNS": "GPU not supported (this GPU model does not do peer access)",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by a driver registry key",
    "U": "unknown",
}

def gen_from_gts(gts: Any) -> int | None:
    """PCIe generation of a parser's GT/s figure (:func:`apps.domain.pci.pcie_generation`)."""
    return pcie_generation(as_float(gts))


def pcie_gbs(gen: Any, width: Any) -> float | None:
    """Spec GB/s per direction of a Gen ``gen`` x ``width`` link (:func:`apps.domain.bandwidth.pcie_link`)."""
    g, w = as_int(gen), as_int(width)
    if not g or not w:
        return None
    spec = pcie_link(g, w).spec_gbs
    return round(spec, 2) if spec is not None else None


# ------------------------------------------------------------------------------------------------
# GPU<->GPU path classes (P01, P02)


def _cpu_vendor(ctx: Ctx) -> str:
    graph = ctx.doc.get("graph") or {}
    vendor = graph.get("cpu_vendor") or ctx.doc.get("cpu_vendor") or ""
    if not vendor:
        for n in ctx.nodes.values():
            if n.get("kind") == "cpu":
                vendor = (n.get("attrs") or {}).get("vendor") or (n.get("attrs") or {}).get("cpu_vendor") or ""
                if vendor:
                    break
    return str(vendor).lower()


def nvb_reachable(ctx: Ctx, a: str, b: str) -> str | None:
    """An intermediate GPU with NVLink to both ``a`` and ``b`` (NCCL path NVB), or None."""
    for c in ctx.gpu_names:
        if c in (a, b):
            continue
        if nv_count(ctx.pair_class(a, c)) and nv_count(ctx.pair_class(c, b)):
            return c
    return None


def _shm_pairs(ctx: Ctx, classes: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """GPU pairs of ``classes`` that NCCL sends through host memory because of its P2P level: the
    engine's verdict (``gpu_pairs[].mechanism`` "shm" with ``shm_cause`` "level"; not pairs whose
    mechanism is unknown or whose driver refuses P2P), or, for documents without it, the class."""
    names = ctx.gpu_names
    if "amd" in _cpu_vendor(ctx) and len(names) <= 2:
        return []  # NCCL allows P2P up to SYS on AMD x86 with <= 2 GPUs (paths.cc L356-362)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            cls = ctx.pair_class(a, b)
            pair = ctx.pair(a, b)
            if pair.get("mechanism") and (pair["mechanism"] != "shm" or pair.get("shm_cause", "level") != "level"):
                continue
            if cls in classes and not nvb_reachable(ctx, a, b):
                out.append((a, b, cls))
    return out


def _pair_text(pairs: list[tuple[str, str, str]], limit: int = 12) -> str:
    shown = [f"{a}-{b} ({cls})" for a, b, cls in pairs[:limit]]
    more = f" and {len(pairs) - limit} more" if len(pairs) > limit else ""
    return ", ".join(shown) + more


def rule_p01(ctx: Ctx) -> list[dict]:
    """P01 GPU pair across sockets.

    Condition: a GPU pair's topo -m class is SYS (legacy SOC) and the pair has no NVLink, directly
    or through one intermediate GPU (NCCL path NVB). MED; HIGH with only 2 GPUs (the pair must be
    ring neighbours). Source: paths.cc L356-365 [S2]; topo.h [S1]; env NCCL_P2P_LEVEL [S12].
    """
    pairs = _shm_pairs(ctx, ("SYS",))
    if not pairs:
        return []
    gpus = sorted({g for a, b, _ in pairs for g in (a, b)}, key=gpu_sort_key)
    sev = "HIGH" if len(ctx.gpu_names) == 2 else "MED"
    msg = (f"{len(pairs)} GPU pair(s) cross the CPU socket link: {_pair_text(pairs)}. NCCL does peer-to-peer only "
           "up to PXB by default, so these pairs exchange data through host memory (SHM) over UPI/xGMI, which NCCL "
           "models at 6-40 GB/s depending on the CPU.")
    return [finding(P01, gpus, msg, severity=sev)]


def rule_p02(ctx: Ctx) -> list[dict]:
    """P02 GPU pair through a CPU host bridge.

    Condition: pair class PHB or NODE, no NVLink (direct or NVB). MED (not raised on AMD hosts with
    <= 2 GPUs, where NCCL keeps P2P). Source: paths.cc L356-362 [S2]; topo.h INTEL_P2P_OVERHEAD [S1].
    """
    pairs = _shm_pairs(ctx, ("PHB", "NODE"))
    if not pairs:
        return []
    gpus = sorted({g for a, b, _ in pairs for g in (a, b)}, key=gpu_sort_key)
    intel = "intel" in _cpu_vendor(ctx)
    msg = (f"{len(pairs)} GPU pair(s) meet only at a CPU host bridge: {_pair_text(pairs)}. Since NCCL 2.23 the "
           "default peer-to-peer cutoff is PXB, so these pairs use shared host memory (SHM) instead of direct "
           "PCIe P2P" + ("; through this Intel root complex NCCL also charges P2P 1.2x for 64-byte TLPs "
                         "(INTEL_P2P_OVERHEAD, search.cc L87-90)." if intel else "."))
    return [finding(P02, gpus, msg)]


# ------------------------------------------------------------------------------------------------
# P2P capability (P03; NVLink pairs are N02)


def p2p_gaps(ctx: Ctx) -> list[tuple[str, str, str]]:
    """(a, b, token) for every GPU pair whose ``nvidia-smi topo -p2p`` cell is not OK."""
    res = ctx.results.get("nvidia_smi_p2p") or {}
    matrix = res.get("matrix") or {}
    out = []
    names = ctx.gpu_names or sorted(matrix, key=gpu_sort_key)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            toks = {normalize_token((matrix.get(a) or {}).get(b)), normalize_token((matrix.get(b) or {}).get(a))}
            toks.discard("")
            bad = sorted(t for t in toks if t not in ("OK", "X"))
            if bad:
                out.append((a, b, bad[0]))
    return out


def rule_p03(ctx: Ctx) -> list[dict]:
    """P03 P2P capability gap.

    Condition: ``nvidia-smi topo -p2p`` cell in {CNS, GNS, TNS, NS, DR, U} for a pair that topo -m
    shows as PIX or PXB (NVLink pairs are rule N02, CRIT). HIGH. Source: [S14]; paths.cc L373-411 [S2].
    """
    out = []
    mode = (ctx.results.get("nvidia_smi_p2p") or {}).get("p2p_mode")
    for a, b, tok in p2p_gaps(ctx):
        cls = ctx.pair_class(a, b)
        if cls not in ("PIX", "PXB"):
            continue
        what = P2P_TOKENS.get(tok, tok)
        msg = (f"{a} and {b} are wired {cls} (through PCIe switches only), yet the driver reports peer-to-peer "
               f"{tok} ({what})" + (f" in the -p2p {mode} matrix" if mode else "") +
               ". NCCL checks the same NVML status and silently falls back to host memory (SHM) for this pair.")
        out.append(finding(P03, [a, b], msg))
    return out


# ------------------------------------------------------------------------------------------------
# ACS (P04)

_ACS_REDIRECT = ("ReqRedir", "CmpltRedir")
_ACS_CTL_KEYS = ("acs_ctl", "acsctl", "acs_ctl_flags", "acs", "acs_control")


def acs_flags(dev: Mapping) -> dict[str, bool]:
    """ACSCtl flags of an lspci -vvv device as {flag: enabled}, whatever shape the parser used."""
    raw = None
    for key in _ACS_CTL_KEYS:
        if dev.get(key) is not None:
            raw = dev[key]
            break
    if raw is None and not any(key in dev for key in _ACS_CTL_KEYS):  # a shape without those keys
        for k, v in dev.items():
            if "acs" in k.lower() and "cap" not in k.lower() and v is not None:
                raw = v
                break
    flags: dict[str, bool] = {}
    if isinstance(raw, Mapping):
        for k, v in raw.items():
            flags[str(k)] = v in (True, "+", 1, "1", "on", "enabled") if not isinstance(v, bool) else v
    elif isinstance(raw, str):
        for m in re.finditer(r"(\w+)([+-])", raw):
            flags[m.group(1)] = m.group(2) == "+"
    elif isinstance(raw, (list, tuple)):
        for item in raw:
            m = re.fullmatch(r"(\w+)([+-])?", str(item).strip())
            if m:
                flags[m.group(1)] = m.group(2) != "-"
    return flags


def rule_p04(ctx: Ctx) -> list[dict]:
    """P04 ACS redirect on the P2P path.

    Condition: an ``lspci -vvv`` bridge has ``ACSCtl: ReqRedir+`` or ``CmpltRedir+`` and GPUs/NICs sit
    below it (so their peer traffic is forced up to the root complex), or, without a device tree,
    the bridge is a PCIe switch downstream port. CRIT (bare metal). Source: NCCL troubleshooting ACS [S13].
    """
    out = []
    for dev in ctx.pci_devices("lspci_verbose"):
        flags = acs_flags(dev)
        on = [f for f in _ACS_REDIRECT if flags.get(f)]
        if not on:
            continue
        bdf = dev.get("bdf") or "?"
        port_type = str(dev.get("port_type") or "")
        node = ctx.node_for_bdf(bdf)
        below = []
        if node:
            below = [ctx.node_name(d) for d in ctx.descendants(node)
                     if (ctx.nodes.get(d) or {}).get("kind") in ("gpu", "nic")]
            if (ctx.nodes.get(node) or {}).get("kind") in ("gpu", "nic"):
                below = []  # an endpoint's own ACS does not redirect peers
        below = sorted(set(below), key=gpu_sort_key)
        endpoints = sum(1 for n in ctx.nodes.values() if n.get("kind") in ("gpu", "nic"))
        if node and ctx.nodes:
            if not below or endpoints < 2:
                continue
        elif "downstream" not in port_type.lower() and "root" not in port_type.lower():
            continue
        where = f"{port_type.lower()} {bdf}".strip() if port_type else f"bridge {bdf}"
        under = f" above {join(below)}" if below else ""
        msg = (f"ACS {' and '.join(f + '+' for f in on)} is enabled on {where}{under}. Peer-to-peer traffic "
               "(GPU to GPU, and GPU to NIC for GPUDirect RDMA) is forced up to the root complex/IOMMU: expect "
               "halved bandwidth, NCCL hangs, or 'NET/IB : Got completion with error 4'. On bare metal ACS "
               "redirect should be off; in a VM it must stay on (use ATS instead).")
        out.append(finding(P04, [bdf] + below, msg,
                           fix=f"Check: sudo lspci -vvv -s {bdf} | grep ACSCtl must show ReqRedir- CmpltRedir- "
                               f"(all ports: sudo lspci -vvv | grep ACSCtl | grep SrcValid+). Disable ACS in the BIOS, "
                               f"or per boot: setpci -s {bdf} ECAP_ACS+0x6.w=0000 (bare metal only). In a VM keep ACS "
                               "on and enable ATS on the NIC."))
    return out


# ------------------------------------------------------------------------------------------------
# link training (P06, P07, P08)


def _gpu_query(ctx: Ctx, gpu_name: str) -> dict:
    g = ctx.gpu(gpu_name)
    rows = [r for r in as_list((ctx.results.get("nvidia_smi_gpus") or {}).get("gpus")) if isinstance(r, Mapping)]
    for r in rows:
        if g.get("bdf") and r.get("bdf") == g.get("bdf"):
            return r
    for r in rows:
        idx = as_int(r.get("index"))
        if idx is not None and (f"GPU{idx}" == gpu_name or idx == as_int(g.get("index"))):
            return r
    return {}


def _lspci(ctx: Ctx, bdf: str | None) -> dict:
    if not bdf:
        return {}
    found = ctx.pci_records("lspci_verbose", bdf)
    return found[0] if found else {}


def _parent_bdf(ctx: Ctx, bdf: str) -> str | None:
    for d in ctx.pci_records("lspci_tree", bdf):
        if d.get("parent_bdf"):
            return d["parent_bdf"]
    for d in ctx.pci_records("sysfs_pci", bdf):
        anc = as_list(d.get("ancestry"))
        if anc:
            return anc[-2] if anc[-1] == bdf and len(anc) > 1 else anc[-1] if anc[-1] != bdf else None
    return None


def _links(ctx: Ctx) -> list[dict]:
    """One record per device link: name, kind, bdf, gen, width, max_gen, max_width, inferred
    (computed once per host; P06, P07 and P08 read the same records)."""
    return ctx.memo("pcie_links", lambda: _device_links(ctx))


def _device_links(ctx: Ctx) -> list[dict]:
    out: dict[str, dict] = {}
    for e in ctx.edges:
        if e.get("kind") != "pcie" or e.get("inferred"):
            continue
        src, dst = e.get("source"), e.get("target")
        child = src
        if (ctx.nodes.get(dst) or {}).get("parent") == src:
            child = dst
        node = ctx.nodes.get(child) or {}
        name = ctx.node_name(child)
        out[name] = {"name": name, "kind": node.get("kind"), "bdf": node.get("bdf"), "gen": as_int(e.get("gen")),
                     "width": as_int(e.get("width")), "max_gen": as_int(e.get("max_gen")),
                     "max_width": as_int(e.get("max_width"))}
    # GPUs as nvidia-smi reports them
    for g in ctx.gpus:
        q = _gpu_query(ctx, g["name"])
        if not q:
            continue
        rec = out.setdefault(g["name"], {"name": g["name"], "kind": "gpu", "bdf": g.get("bdf")})
        for key, qk in (("gen", "link_gen_current"), ("width", "link_width_current"),
                        ("max_gen", "link_gen_max"), ("max_width", "link_width_max")):
            if rec.get(key) is None:
                rec[key] = as_int(q.get(qk))
    # endpoints and upstream ports as lspci -vvv reports them
    names_by_bdf = {g.get("bdf"): g["name"] for g in ctx.gpus if g.get("bdf")}
    names_by_bdf.update({n.get("bdf"): n["name"] for n in ctx.nics if n.get("bdf") and n.get("name")})
    known = {r.get("bdf") for r in out.values() if r.get("bdf")}
    for d in ctx.pci_devices("lspci_verbose"):
        bdf = d.get("bdf")
        ptype = str(d.get("port_type") or "").lower()
        if not bdf or bdf in known or ("downstream" in ptype or "root" in ptype):
            continue  # lspci never marks root/downstream ports; judge the device below instead
        if (d.get("sta_width") is None and d.get("cap_width") is None and d.get("sta_speed_gts") is None
                and d.get("cap_speed_gts") is None):
            continue  # no link shown (the CPUs' uncore functions of a whole-machine capture): nothing to judge
        cls = str(d.get("class_code") or "").lower()
        cname = str(get(d, "class_name", default="") or "").lower()
        kind = ("gpu" if cls.startswith(("03", "0x03")) or "vga" in cname or "3d" in cname
                else "nic" if cls.startswith(("02", "0x02")) or "network" in cname or "ethernet" in cname
                or "infiniband" in cname else "switch" if "upstream" in ptype else "other")
        out[names_by_bdf.get(bdf, bdf)] = {
            "name": names_by_bdf.get(bdf, bdf), "kind": kind, "bdf": bdf,
            "gen": gen_from_gts(d.get("sta_speed_gts")), "width": as_int(d.get("sta_width")),
            "max_gen": gen_from_gts(d.get("cap_speed_gts")), "max_width": as_int(d.get("cap_width")),
        }
    return list(out.values())


def _relevant(ctx: Ctx, rec: dict) -> bool:
    """GPUs, RDMA NICs of the document and PCIe switches matter for collectives; a BMC, a 1 GbE
    management port or a RAID card with a narrow link does not (their findings are LOW)."""
    name = rec.get("name")
    if rec.get("kind") == "gpu" or name in ctx.gpu_names or ctx.nic(str(name)):
        return True
    return rec.get("kind") == "switch"


def _parent_cap(ctx: Ctx, bdf: str | None) -> tuple[int | None, int | None]:
    if not bdf:
        return None, None
    parent = _parent_bdf(ctx, bdf)
    p = _lspci(ctx, parent)
    return gen_from_gts(p.get("cap_speed_gts")), as_int(p.get("cap_width"))


def rule_p05(ctx: Ctx) -> list[dict]:
    """P05 IOMMU translating on bare metal.

    Condition (host_info): a GPU or NIC function in a translating IOMMU domain (``DMA``/``DMA-FQ``
    in /sys/.../iommu_group/type) on a host that is not virtualized; the kernel command line
    (``intel_iommu=on``/``amd_iommu=on`` without ``iommu=pt``) is quoted as the likely cause. HIGH.
    Source: NCCL troubleshooting [S13]; #257, nccl-tests #115 [S37][S38]; kernel ABI [S27].
    """
    h = ctx.host or {}
    groups = h.get("iommu_groups") or {}
    if not isinstance(groups, Mapping) or h.get("virtualized") is True:
        return []
    translated = sorted(b for b, t in groups.items() if str(t).lower() in ("dma", "dma-fq"))
    if not translated:
        return []
    by_bdf = {g.get("bdf"): g.get("name") for g in ctx.gpus if g.get("bdf")}
    by_bdf.update({n.get("bdf"): n.get("name") for n in ctx.nics if n.get("bdf")})
    names = [by_bdf.get(b) or b for b in translated]
    cmd = str(h.get("cmdline") or "")
    words = iommu_words(cmd)
    why = (f" The kernel command line has {' '.join(words)}" + ("" if is_passthrough(words) else " without iommu=pt")
           + "." if words else "")
    bare = "" if h.get("virtualized") is False else " (the host was not reported as virtualized)"
    msg = (f"{join(names)} sit in a translating IOMMU domain ({', '.join(sorted({str(groups[b]) for b in translated}))}) "
           f"on bare metal{bare}: peer-to-peer and GPUDirect RDMA traffic is translated or redirected through the "
           f"root complex, which users report as hangs and low P2P bandwidth.{why}")
    return [finding(P05, [n for n in names if n in by_bdf.values()] or names, msg)]


def rule_p06(ctx: Ctx) -> list[dict]:
    """P06 PCIe link width downtrained.

    Condition: a device's negotiated width (LnkSta / sysfs current_link_width / nvidia-smi
    pcie.link.width.current) is below its capability and below the parent port's capability
    (when known). HIGH: width does not change with power state. Source: pciutils link_compare [S25].
    """
    out = []
    for rec in _links(ctx):
        w, mw = rec.get("width"), rec.get("max_width")
        if not w or not mw or w >= mw:
            continue
        _pg, pw = _parent_cap(ctx, rec.get("bdf"))
        if pw is not None and w >= pw:
            continue  # the slot is narrower: P08, not a training fault
        loss = pcie_gbs(rec.get("gen") or rec.get("max_gen"), w)
        full = pcie_gbs(rec.get("gen") or rec.get("max_gen"), mw)
        bw = f" ({fmt_gbs(loss)} instead of {fmt_gbs(full)} per direction)" if loss and full else ""
        msg = (f"{rec['name']} trained its PCIe link at x{w} although it is capable of x{mw}{bw}. A narrowed "
               "link is a real fault (riser, slot, retimer or bifurcation), not a power-saving state.")
        sev = None if _relevant(ctx, rec) else "LOW"
        if sev:
            msg += " This device is not a GPU, RDMA NIC or PCIe switch, so collectives are not affected."
        out.append(finding(P06, [rec["name"]], msg, severity=sev))
    return out


def rule_p07(ctx: Ctx) -> list[dict]:
    """P07 PCIe link speed downgraded.

    Condition: NIC/switch/other device links below their capable generation at any time -> HIGH;
    a GPU link below ``pcie.link.gen.max`` is HIGH only while the GPU is in pstate P0 (under load),
    otherwise one INFO finding (idle GPUs drop to Gen1 by design). Source: nvidia-smi help [S29]; [S51].
    """
    out, idle = [], []
    for rec in _links(ctx):
        g, mg = rec.get("gen"), rec.get("max_gen")
        if not g or not mg or g >= mg:
            continue
        if rec.get("kind") == "gpu":
            q = _gpu_query(ctx, rec["name"])
            pstate = str(q.get("pstate") or "").upper()
            if pstate == "P0":
                msg = (f"{rec['name']} runs its PCIe link at Gen{g} while busy (pstate P0); it can do Gen{mg}. "
                       f"That caps host-to-GPU and GPUDirect traffic at about "
                       f"{fmt_gbs(pcie_gbs(g, rec.get('width') or 16))} per direction.")
                out.append(finding(P07, [rec["name"]], msg))
            else:
                idle.append((rec["name"], g, mg, pstate))
            continue
        msg = (f"{rec['name']} ({rec.get('kind') or 'device'}) trained its PCIe link at Gen{g} although it and its "
               f"port can do Gen{mg}. Unlike GPUs, NICs and switches do not downclock when idle, so this link is "
               "stuck low.")
        sev = None if _relevant(ctx, rec) else "LOW"
        if sev:
            msg += " It is not a GPU, RDMA NIC or PCIe switch, so collectives are not affected."
        out.append(finding(P07, [rec["name"]], msg, severity=sev))
    if idle:
        names = [n for n, *_ in idle]
        states = {p for *_, p in idle if p}
        st = f" (pstate {join(sorted(states), 'or')})" if states else " (pstate not reported)"
        msg = (f"{join(names)} report a PCIe generation below their maximum{st}. NVIDIA GPUs drop to a lower "
               "generation when idle, so this is expected and not a fault unless it persists under load.")
        out.append(finding(P07, names, msg, severity="INFO", title="PCIe link downclocked while idle (expected)"))
    return out


def rule_p08(ctx: Ctx) -> list[dict]:
    """P08 Platform caps the device.

    Condition: nvidia-smi ``pcie.link.gen.hostmax`` < ``pcie.link.gen.gpumax``, or a device's LnkCap
    exceeds its parent port's LnkCap (generation or width). LOW: design limit, not a fault.
    Source: nvidia-smi help [S29]; xml.cc L682-718 [S7].
    """
    out = []
    for g in ctx.gpus:
        q = _gpu_query(ctx, g["name"])
        host, dev = as_int(q.get("link_gen_host_max")), as_int(q.get("link_gen_gpu_max"))
        if host and dev and host < dev:
            msg = (f"{g['name']} is a PCIe Gen{dev} device in a Gen{host} slot: the link trains correctly at Gen{host}, "
                   "so the platform, not a fault, sets the ceiling.")
            out.append(finding(P08, [g["name"]], msg))
    reported = {d for f in out for d in f["devices"]}
    for rec in _links(ctx):
        if rec["name"] in reported or not rec.get("bdf"):
            continue
        pg, pw = _parent_cap(ctx, rec.get("bdf"))
        mg, mw = rec.get("max_gen"), rec.get("max_width")
        parts = []
        if pg and mg and pg < mg:
            parts.append(f"Gen{mg} device behind a Gen{pg} port")
        if pw and mw and pw < mw:
            parts.append(f"x{mw} device in an x{pw} slot")
        if parts:
            msg = f"{rec['name']}: {' and '.join(parts)}; the link is limited by the platform, not by a fault."
            out.append(finding(P08, [rec["name"]], msg))
    return out


# ------------------------------------------------------------------------------------------------
# sharing (P09, P10, P11)


def _contention(ctx: Ctx, kinds: tuple[str, ...]) -> list[dict]:
    best: dict[str, dict] = {}
    for c in as_list(ctx.doc.get("contention")):
        if not isinstance(c, Mapping) or c.get("kind") not in kinds:
            continue
        ratio = as_float(c.get("ratio"))
        if ratio is None:
            d, cap = as_float(c.get("demand_gbs")), as_float(c.get("capacity_gbs"))
            ratio = d / cap if d and cap else None
        if ratio is None or ratio <= 1.0:
            continue
        key = c.get("element") or c.get("label")
        if key not in best or ratio > best[key]["_ratio"]:
            best[key] = dict(c, _ratio=ratio)
    return list(best.values())


_SCENARIO = {"gpu_to_nic": "every GPU sending to its NIC at once", "all_pairs": "all GPU pairs exchanging at once"}


def _contention_message(c: dict, what: str) -> str:
    devices = [str(d) for d in as_list(c.get("devices"))]
    scen = _SCENARIO.get(c.get("scenario"), str(c.get("scenario") or "concurrent traffic"))
    label = str(c.get("label") or c.get("element"))
    # contention labels already name the element ("uplink of PCIe switch X", "root port 0000:00:01.1")
    words = what.lower().split()
    subject = (f"The {label}" if label.lower().startswith(("uplink of", *(" ".join(words[i:]) for i in range(len(words)))))
               else f"{what} {label}")
    return (f"{subject} is shared by {join(devices)}: with {scen}, {fmt_num(c.get('flows'))} flow(s) need "
            f"{fmt_gbs(as_float(c.get('demand_gbs')))} but the link carries {fmt_gbs(as_float(c.get('capacity_gbs')))} "
            f"per direction ({c['_ratio']:.1f}x oversubscribed). NCCL sees this and builds fewer or slower channels.")


def rule_p09(ctx: Ctx) -> list[dict]:
    """P09 Shared switch uplink oversubscribed.

    Condition: a ``contention`` entry of kind ``switch_uplink`` whose demand exceeds its capacity
    (ratio > 1). MED; HIGH when >= 2x. Source: topo.cc L649-699 [S3]; search.cc L81-121 [S5]; #412 [S43].
    """
    out = []
    for c in _contention(ctx, ("switch_uplink",)):
        sev = "HIGH" if c["_ratio"] >= 2.0 else "MED"
        msg = _contention_message(c, "The uplink of PCIe switch")
        if _inferred(ctx, c):
            sev = "LOW"
            msg += _INFERRED_NOTE
        out.append(finding(P09, [c.get("label") or c.get("element")] + as_list(c.get("devices")), msg, severity=sev))
    return out


_INFERRED_NOTE = (" This switch and its link were inferred from nvidia-smi topo -m alone (width and generation "
                  "assumed), so the ratio is an estimate: upload lspci -vvv to confirm.")


def _inferred(ctx: Ctx, c: Mapping) -> bool:
    node = ctx.nodes.get(str(c.get("element"))) or {}
    return bool(node.get("inferred")) or "inferred" in str(c.get("label") or "") or bool(ctx.doc.get("inferred"))


def rule_p10(ctx: Ctx) -> list[dict]:
    """P10 Shared root port / root complex.

    Condition: a ``contention`` entry of kind ``root_port`` or ``root_complex`` with ratio > 1
    (>= 2 endpoints whose links exceed the port). MED. Source: derived from [S3][S5].
    """
    out = []
    for c in _contention(ctx, ("root_port", "root_complex")):
        what = "Root port" if c.get("kind") == "root_port" else "Root complex"
        msg = _contention_message(c, what)
        sev = None
        if _inferred(ctx, c):
            sev, msg = "LOW", msg + _INFERRED_NOTE.replace("This switch", "This element")
        out.append(finding(P10, [c.get("label") or c.get("element")] + as_list(c.get("devices")), msg, severity=sev))
    return out


def rule_p11(ctx: Ctx) -> list[dict]:
    """P11 Multi-NIC on a PCIe-only box.

    Condition: no NVLink pair at all, >= 2 GPUs and more than one Active compute NIC. INFO.
    Source: sjeaugey in NCCL #412 [S43].
    """
    nics = ctx.compute_nics()
    if len(ctx.gpu_names) < 2 or len(nics) < 2 or ctx.nv_pairs():
        return []
    if any(p.get("mechanism") in ("unknown", "nvlink", "nvswitch") for p in ctx.pairs.values()):
        return []  # NVLink (or xGMI) present, or not known absent: not a PCIe-only box
    names = [n.get("name") for n in nics]
    msg = (f"This node has no NVLink and {len(nics)} active NICs ({join(names)}). NCCL aggregates NICs only when "
           "GPUs are NVLink-connected with bandwidth at least the NIC sum, so on a PCIe-only node the extra NICs "
           "rarely raise all-reduce bandwidth (all-to-all can still benefit).")
    return [finding(P11, names, msg)]


# ------------------------------------------------------------------------------------------------
# chipset (P12)

# device names of a PC chipset: Intel PCH root ports and devices ("C610/X99 series chipset PCI Express Root
# Port", "Cannon Lake PCH ..."), AMD chipsets behind a CPU root port ("600 Series Chipset USB 3.2
# Controller", Promontory). AMD's on-die FCH ("FCH SMBus Controller") is not a chipset downlink.
_CHIPSET_RE = re.compile(r"\bchipset\b|\bPCH\b|\bPromontory\b", re.IGNORECASE)


def _pci_tree(ctx: Ctx) -> tuple[dict[str, str | None], dict[str, str]]:
    """(parent, name) of each PCI function: parents from lspci -tv, hwloc and the sysfs ancestry;
    names from lspci -tv, hwloc and lspci -vvv (``lspci -tv`` names no bridge)."""
    parent: dict[str, str | None] = {}
    names: dict[str, str] = {}
    for d in ctx.pci_devices("lspci_tree"):
        if d.get("bdf"):
            parent.setdefault(d["bdf"], d.get("parent_bdf"))
            if d.get("name"):
                names.setdefault(d["bdf"], str(d["name"]))
    for d in as_list((ctx.results.get("hwloc_xml") or {}).get("pci_devices")):
        if isinstance(d, Mapping) and d.get("bdf"):
            parent.setdefault(d["bdf"], d.get("parent_bdf"))
            name = " ".join(str(d[k]) for k in ("vendor_name", "device_name") if d.get(k))
            if name:
                names.setdefault(d["bdf"], name)
    for d in ctx.pci_devices("sysfs_pci"):
        chain = [b for b in as_list(d.get("ancestry")) if b] + ([d["bdf"]] if d.get("bdf") else [])
        for i, b in enumerate(chain):
            parent.setdefault(b, chain[i - 1] if i else None)
    for d in ctx.pci_devices("lspci_verbose"):
        if d.get("bdf") and d.get("name"):
            names.setdefault(d["bdf"], str(d["name"]))
    return parent, names


def _ancestors(parent: Mapping[str, str | None], bdf: str) -> list[str]:
    out: list[str] = []
    cur = parent.get(bdf)
    while cur and cur not in out:
        out.append(cur)
        cur = parent.get(cur)
    return out


def rule_p12(ctx: Ctx) -> list[dict]:
    """P12 Chipset-attached GPU.

    Condition: a GPU's PCIe path goes through the chipset rather than a CPU root port: a bridge
    above it is named as a chipset port (Intel PCH root ports, AMD chipset switch ports, as lspci
    -vvv and hwloc name bridges), or the CPU root port above it also leads to chipset devices
    (AMD boards hang the chipset, its USB/SATA controllers and its slots below one CPU root port;
    ``lspci -tv`` names no bridge but names those devices). MED (LOW with a single GPU). A tree
    without names for the chipset's devices says nothing: no finding. Source: club-3090 [S71].
    """
    parent, names = _pci_tree(ctx)
    if not parent:
        return []
    gpus = [g for g in ctx.gpus if g.get("bdf") in parent]
    gpu_bdfs = {g["bdf"] for g in gpus}
    chains = {b: _ancestors(parent, b) for b in parent}  # walked once, not once per GPU
    out = []
    for g in gpus:
        chain = chains[g["bdf"]]
        if not chain:
            continue  # directly on a root bus: integrated, not behind any port
        named = [b for b in chain if _CHIPSET_RE.search(names.get(b, ""))]
        top = chain[-1]
        if named:
            via, why = named[0], f"{names[named[0]]} ({named[0]})"
        else:
            below = [b for b in parent if b not in gpu_bdfs and b[:-2] != g["bdf"][:-2] and top in chains[b]]
            chipset = sorted({names[b] for b in below if _CHIPSET_RE.search(names.get(b, ""))})
            if not chipset:
                continue
            via, why = top, f"root port {top}, which also leads to the chipset's {join(chipset)}"
        link = _lspci(ctx, top)
        gen, width = gen_from_gts(link.get("sta_speed_gts")), as_int(link.get("sta_width"))
        uplink = (f" That uplink runs Gen{gen} x{width} ({fmt_gbs(pcie_gbs(gen, width))} per direction), shared with "
                  "every device behind the chipset." if gen and width else
                  " The uplink's width is not reported (lspci -vvv of that root port, as root, shows it).")
        sev = None if len(ctx.gpus) > 1 else "LOW"
        msg = (f"{g['name']} ({g['bdf']}) is attached through the chipset: its path to the CPU goes through {why}."
               + uplink + " The chipset's narrow uplink bounds this GPU's traffic, and in a collective the slowest "
               "GPU bounds every ring step; nvidia-smi topo -m shows PHB for it just as for a CPU-attached GPU.")
        out.append(finding(P12, [g["name"], via], msg, severity=sev))
    return out


RULES = [rule_p01, rule_p02, rule_p03, rule_p04, rule_p05, rule_p06, rule_p07, rule_p08, rule_p09, rule_p10, rule_p11,
         rule_p12]
