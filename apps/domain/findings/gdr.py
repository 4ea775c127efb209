"""GPU<->NIC rules G01-G06 of domain.md section 1c (GPUDirect RDMA, PXN, NIC links).

Inputs: the document's ``gpu_nic`` (the NIC each GPU uses, its path class, GDR and PXN relay),
``gpu_nic_matrix``, ``nics`` and the NICs' PCIe edges in ``graph``; the NCCL environment
(``host_info`` ``nccl_env`` mapping, or an ``nccl_env`` result) for G03/G04; the agent's
``host_info`` (``peermem``, ``dmabuf``; or the graph's ``gdr_module``) for G02.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from apps.domain.bandwidth import ib_port
from apps.domain.findings.base import (
    GDR_CLASSES, Ctx, Rule, as_float, as_list, finding, fmt_gbs, fmt_num, gpu_sort_key, join, normalize_token,
)
from apps.domain.findings.pcie import gen_from_gts, pcie_gbs
from apps.domain.names import PCIE_CLASSES

G01 = Rule("G01", "NIC too far for GPUDirect RDMA", "MED",
           "Put the NIC on the GPU's PCIe switch; on NVLink systems rely on PXN (G04); experiment with "
           "NCCL_NET_GDR_LEVEL=PHB only if a GDR perftest (ib_write_bw --use_cuda) is good.",
           "paths.cc L511-533, L845-852 [S2]; env NCCL_NET_GDR_LEVEL, NCCL_NET_GDR_C2C [S12]; GPUDirect RDMA doc "
           "(same upstream root complex) [S17]; GPUDirect RDMA user manual [S18]; NCCL #465 [S41]")
G02 = Rule("G02", "GDR kernel support missing", "HIGH",
           "modprobe nvidia-peermem (and load it at boot), or use DMA-BUF (open GPU kernel modules and a kernel "
           ">= 5.12; NVIDIA recommends DMA-BUF).",
           "net_ib/gdr.cc L18-20, init.cc L546-552, topo.cc L1653 [S9][S8][S3]; NCCL #897, #1537, #489 "
           "[S40][S39][S42]; GPU Operator RDMA doc [S19]")
G03 = Rule("G03", "GDR level overridden", "MED",
           "Remove NCCL_NET_GDR_LEVEL unless a measured benefit exists.",
           "env doc [S12]; paths.cc L243-279 (level parsing) [S2]")
G04 = Rule("G04", "PXN relay available / disabled", "LOW",
           "Leave PXN enabled (the default): unset NCCL_PXN_DISABLE.",
           "paths.cc L812-842, L668-685 [S2]; env NCCL_PXN_DISABLE, NCCL_P2P_PXN_LEVEL [S12]")
G05 = Rule("G05", "GPU:NIC ratio > 1 per switch", "INFO",
           "Use all NICs (exact NCCL_IB_HCA list) and consider NCCL_NETDEVS_POLICY; budget ~1/k of a NIC per GPU.",
           "env NCCL_NETDEVS_POLICY [S12]; tuning.cc collnet GPU/NIC ratio L345 [S6]")
G06 = Rule("G06", "NIC PCIe link narrower than port rate", "HIGH",
           "Use a Gen5 x16 slot for NDR/XDR NICs; fix downtraining (P06/P07).",
           "PCIe table (domain.md 2.1); topo.cc L418 + L657 [S3]")


def _choices(ctx: Ctx) -> list[dict]:
    """The NIC each GPU uses: ``gpu_nic``, or the closest cell of ``gpu_nic_matrix`` per GPU."""
    rows = [r for r in as_list(ctx.doc.get("gpu_nic")) if isinstance(r, Mapping) and r.get("gpu")]
    if rows:
        return rows
    order = {c: i for i, c in enumerate(PCIE_CLASSES)}
    best: dict[str, dict] = {}
    active = {n.get("name") for n in ctx.compute_nics()}
    for r in as_list(ctx.doc.get("gpu_nic_matrix")):
        if not isinstance(r, Mapping) or r.get("nic") not in active:
            continue
        cls = normalize_token(r.get("path_class"))
        rank = order.get(cls, 99)
        cur = best.get(r.get("gpu"))
        if cur is None or rank < order.get(normalize_token(cur.get("path_class")), 99):
            best[r["gpu"]] = dict(r, gdr=cls in GDR_CLASSES, pxn_via=None)
    return list(best.values())


def _pxn_disabled(ctx: Ctx) -> bool:
    return ctx.env.get("NCCL_PXN_DISABLE", "").strip() == "1"


def rule_g01(ctx: Ctx) -> list[dict]:
    """G01 NIC too far for GPUDirect RDMA.

    Condition: the NIC a GPU uses is at PHB, NODE or SYS (beyond NCCL's default GDR cutoff PXB on
    x86), and no PXN relay brings the GPU's data to a GPU next to a NIC. MED; HIGH on rail designs
    (one NIC per GPU). Source: paths.cc L511-533 [S2]; env NCCL_NET_GDR_LEVEL [S12]; [S17][S18].
    """
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in _choices(ctx):
        cls = normalize_token(r.get("path_class"))
        if cls in GDR_CLASSES or not cls or cls.startswith("NV"):
            continue
        if r.get("gdr") is True:
            continue
        if r.get("pxn_via") and not _pxn_disabled(ctx):
            continue
        groups[(str(r.get("nic")), cls)].append(str(r.get("gpu")))
    sev = "HIGH" if ctx.rail_design() else "MED"
    virtual = bool((ctx.doc.get("graph") or {}).get("virtual_pci"))
    out = []
    for (nic, cls), gpus in sorted(groups.items()):
        gpus.sort(key=gpu_sort_key)
        cross = " and the CPU socket link" if cls == "SYS" else ""
        msg = (f"{join(gpus)} reach their NIC {nic} only through {cls} (a CPU host bridge{cross}), so NCCL turns "
               "GPUDirect RDMA off for them: their network traffic is staged in host memory next to the GPU and "
               "crosses the CPU instead of going straight from GPU memory to the NIC.")
        out.append(finding(G01, gpus + [nic], msg, severity=sev, fix=G01_VM_FIX if virtual else None))
    return out


# in a VM the PCIe tree is the hypervisor's (or a provider's flattened NCCL topology file): no card
# can be moved; NCCL needs the provider's file to know the physical GPU-NIC affinity
G01_VM_FIX = ("This PCIe tree is a virtual machine's (or a flattened topology file): moving the NIC is not "
              "possible from inside it. Give NCCL the provider's topology file (NCCL_TOPO_FILE; Azure ships "
              "them in azhpc-images topology/, AWS in aws-ofi-nccl topology/) so it sees the physical GPU-NIC "
              "pairing, or ask the provider for an instance type whose NICs sit on the GPUs' switches.")


def _gdr_module(ctx: Ctx) -> tuple[bool | None, str]:
    """(GPUDirect RDMA kernel support, what host_info said): the engine's graph flag, else host_info."""
    h = ctx.host or {}
    peer, dmabuf = h.get("peermem"), h.get("dmabuf")
    said = f"peermem {peer or 'not reported'}, DMA-BUF {'not reported' if dmabuf is None else 'yes' if dmabuf else 'no'}"
    flag = (ctx.doc.get("graph") or {}).get("gdr_module")
    if flag is None and h:
        flag = True if (peer and peer != "none") or dmabuf is True else (
            False if peer == "none" and dmabuf is False else None)
    return flag, said


def rule_g02(ctx: Ctx) -> list[dict]:
    """G02 GDR kernel support missing.

    Condition: the agent's host_info says no peermem module (nvidia_peermem / nv_mem) is loaded and
    DMA-BUF is unusable, while some GPU's NIC is PIX/PXB (NCCL would use GPUDirect RDMA). HIGH.
    Source: net_ib/gdr.cc L18-20, init.cc L546-552 [S9][S8]; NCCL #897, #1537 [S40][S39].
    """
    flag, said = _gdr_module(ctx)
    if flag is not False:
        return []
    near = [r for r in _choices(ctx) if normalize_token(r.get("path_class")) in GDR_CLASSES
            or (r.get("pxn_via") and not _pxn_disabled(ctx))]
    if not near:
        return []
    gpus = sorted({str(r.get("gpu")) for r in near}, key=gpu_sort_key)
    nics = sorted({str(r.get("nic")) for r in near}, key=gpu_sort_key)
    msg = (f"{join(gpus)} have their NIC ({join(nics)}) on their PCIe switch, but the kernel has no GPUDirect RDMA "
           f"support ({said}): NCCL marks the NICs without GDR and stages every inter-node byte in host memory "
           "(NCCL logs 'GPU Direct RDMA Disabled for HCA').")
    return [finding(G02, gpus + nics, msg)]


def rule_g03(ctx: Ctx) -> list[dict]:
    """G03 GDR level overridden.

    Condition: ``NCCL_NET_GDR_LEVEL`` is LOC/0 (GDR off) while some GPU has a PIX/PXB NIC, or SYS/5
    (GDR across CPUs). MED. Source: env doc [S12]; paths.cc L243-279 [S2].
    """
    val = ctx.env.get("NCCL_NET_GDR_LEVEL")
    if val is None:
        return []
    v = val.strip().upper()
    local = [str(r.get("gpu")) for r in _choices(ctx) if normalize_token(r.get("path_class")) in GDR_CLASSES]
    if v in ("LOC", "0") and local:
        msg = (f"NCCL_NET_GDR_LEVEL={val} turns GPUDirect RDMA off although {join(sorted(local, key=gpu_sort_key))} "
               "have a NIC on their PCIe switch; every inter-node byte is bounced through host memory.")
        return [finding(G03, sorted(local, key=gpu_sort_key), msg)]
    if v in ("SYS", "5", "4"):
        msg = (f"NCCL_NET_GDR_LEVEL={val} forces GPUDirect RDMA even across CPU sockets; on many platforms GDR "
               "across the CPU is slower than host staging or misbehaves.")
        return [finding(G03, [], msg)]
    return []


def rule_g04(ctx: Ctx) -> list[dict]:
    """G04 PXN relay available / disabled.

    Condition: a GPU's NIC is far (PHB/NODE/SYS) but an NVLink peer sits next to it (``pxn_via``):
    INFO when PXN is on (show the relay), MED when ``NCCL_PXN_DISABLE=1``. Source: paths.cc L812-842 [S2].
    """
    relays = [(str(r.get("gpu")), str(r.get("pxn_via")), str(r.get("nic"))) for r in _choices(ctx)
              if r.get("pxn_via")]
    if not relays:
        return []
    relays.sort(key=lambda t: gpu_sort_key(t[0]))
    text = ", ".join(f"{g} via {p} to {n}" for g, p, n in relays)
    devices = [g for g, _, _ in relays]
    if _pxn_disabled(ctx):
        msg = (f"NCCL_PXN_DISABLE=1 although PXN could relay {text}: these GPUs now send through host memory "
               "instead of over NVLink to the GPU next to the NIC.")
        return [finding(G04, devices, msg, severity="MED")]
    msg = (f"PXN relay in use: {text}. NCCL sends these GPUs' data over NVLink to the GPU next to the NIC and "
           "uses GPUDirect RDMA from there, keeping traffic rail-local.")
    return [finding(G04, devices, msg, severity="INFO", title="PXN relay available",
                    fix="Nothing to change: keep PXN enabled (the default).")]


def rule_g05(ctx: Ctx) -> list[dict]:
    """G05 GPU:NIC ratio > 1.

    Condition: k > 1 GPUs use the same NIC, whatever its distance (one NIC for eight GPUs across
    the sockets bounds their inter-node traffic as much as one on their switch). INFO for k = 2,
    MED above. The message says what limits: the NIC's port rate, or its PCIe link where that is
    narrower (G06), or that the rate is not reported. Source: env NCCL_NETDEVS_POLICY [S12];
    tuning.cc L345 [S6].
    """
    share: dict[str, list[str]] = defaultdict(list)
    for r in _choices(ctx):
        if r.get("nic") and normalize_token(r.get("path_class")):
            share[str(r["nic"])].append(str(r.get("gpu")))
    out = []
    for nic, gpus in sorted(share.items(), key=lambda kv: gpu_sort_key(kv[0])):
        if len(gpus) < 2:
            continue
        gpus.sort(key=gpu_sort_key)
        out.append(finding(G05, gpus + [nic], _sharing_message(ctx, nic, gpus),
                           severity="INFO" if len(gpus) == 2 else "MED"))
    return out


def _sharing_message(ctx: Ctx, nic: str, gpus: list[str]) -> str:
    """What ``gpus`` get of ``nic`` when all send at once, and what limits it: the NIC's port, or
    its PCIe link where that is narrower (G06), when the GPUs' own links could feed more."""
    rate = as_float(ctx.nic(nic).get("rate_gbps"))
    k = len(gpus)
    tail = " Inter-node bandwidth per node is bounded by the sum of the NICs, not by the GPU count."
    if not rate:
        return (f"{k} GPUs share one NIC, {nic}: {join(gpus)}. Its line rate is not reported (send ibstat, or "
                f"ibv_devinfo, to know), so what each GPU gets is unknown.{tail}")
    link_gbs, link = _nic_pcie(ctx, ctx.nic(nic))
    narrow = link_gbs is not None and link_gbs < rate / 8
    # what the port carries, as the verdict and the path count it (bandwidth.ib_port: line rate x eta_net)
    takes = link_gbs if narrow else ib_port(rate).expected_gbs
    feeds = [as_float((ctx.uplink(g) or {}).get("spec_gbs")) for g in gpus]
    limits = all(f is not None for f in feeds) and sum(feeds) > takes
    if narrow:
        return (f"{k} GPUs share one {fmt_num(rate)} Gb/s NIC, {nic}, whose PCIe link ({link}, {fmt_gbs(link_gbs)}) "
                f"is narrower than its port (G06): {join(gpus)} get about {_each(takes, k)} each when all send "
                f"at once{', the link being the limit' if limits else ''}.{tail}")
    limit = f", the NIC's {fmt_gbs(takes)} per direction being the limit" if limits else ""
    return (f"{k} GPUs share one {fmt_num(rate)} Gb/s NIC, {nic}: {join(gpus)} get about {_each(takes, k)} each "
            f"when all send at once{limit}.{tail}")


def _each(gbs: float, k: int) -> str:
    """A GPU's share of ``gbs``, written as the verdict writes it (two decimals)."""
    return f"{fmt_num(round(gbs / k, 2))} GB/s"


def _nic_pcie(ctx: Ctx, nic: Mapping) -> tuple[float | None, str]:
    """(spec GB/s, 'Gen4 x16') of a NIC's PCIe link from the graph, else lspci/sysfs; (None, '') if unknown."""
    node = nic.get("node")
    if node:
        e = ctx.uplink(node)
        if e and not e.get("inferred") and e.get("gen") and e.get("width"):
            bw = as_float(e.get("spec_gbs")) or pcie_gbs(e.get("gen"), e.get("width"))
            return bw, f"Gen{e['gen']} x{e['width']}"
    bdf = nic.get("bdf")
    if bdf:
        for d in ctx.pci_records("lspci_verbose", bdf):
            g, w = gen_from_gts(d.get("sta_speed_gts")), d.get("sta_width")
            if g and w:
                return pcie_gbs(g, w), f"Gen{g} x{w}"
    return None, ""


def rule_g06(ctx: Ctx) -> list[dict]:
    """G06 NIC PCIe link narrower than port rate.

    Condition: the NIC's trained PCIe bandwidth (section 2.1 spec) is below its port Rate/8, e.g.
    NDR 400 Gb/s (50 GB/s) on Gen4 x16 (31.5 GB/s). HIGH. Source: domain.md 2.1; topo.cc L418, L657 [S3].
    """
    out = []
    seen = set()
    for nic in ctx.compute_nics():
        rate = as_float(nic.get("rate_gbps"))
        if not rate:
            continue
        bw, link = _nic_pcie(ctx, nic)
        if bw is None or bw >= rate / 8:
            continue
        key = (nic.get("bdf") or nic.get("name"))
        if key in seen:
            continue
        seen.add(key)
        users = sorted((str(r.get("gpu")) for r in _choices(ctx) if r.get("nic") == nic.get("name")), key=gpu_sort_key)
        msg = (f"{nic.get('name')} runs at {fmt_num(rate)} Gb/s ({fmt_gbs(rate / 8)}) but its PCIe link is {link} "
               f"({fmt_gbs(bw)} per direction): the NIC can never be fed at line rate"
               + (f"; {join(users)} {'gets' if len(users) == 1 else 'share'} at most {fmt_gbs(bw)} through it."
                  if users else "."))
        out.append(finding(G06, [nic.get("name")], msg))
    return out


RULES = [rule_g02, rule_g01, rule_g03, rule_g04, rule_g05, rule_g06]
