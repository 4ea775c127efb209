"""Host, NUMA and environment rules H01-H07 of domain.md section 1e, X01 (the sources of one host
disagree) and X02 (a device name unsafe in a shell).

Inputs: the document's ``gpus`` (CPU affinity, NUMA, model), ``gpu_nic``, ``nics``, ``warnings``; the
NCCL environment (``host_info`` ``nccl_env`` mapping, or an ``nccl_env`` result) for H03/H04/H05/H07;
``host_info`` ``netdevs``/``default_route_netdev`` for H05 and X02; GPU names of ``nvidia_smi_gpus``
and ``nvidia_smi_q`` and the ``nvidia_smi_q`` minor numbers for H06. H08 compares several nodes:
``apps/domain/fleet_rules.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from apps.domain.findings.base import (
    Ctx, Rule, as_int, as_list, finding, gpu_label, gpu_sort_key, join, normalize_token, nv_count, section_gpus,
)
from apps.domain.shellsafe import is_safe_name, printable

H01 = Rule("H01", "Rank pinned away from its GPU", "MED",
           "Bind ranks per GPU NUMA node (numactl, Slurm --cpu-bind/--gpu-bind), or set NCCL_IGNORE_CPU_AFFINITY=1.",
           "topo.cc L2148-2190 [S3]; env NCCL_IGNORE_CPU_AFFINITY [S12]")
H02 = Rule("H02", "GPU and its NIC on different NUMA nodes", "MED",
           "Use per-socket NICs and assign local rank -> GPU -> NIC consistently.",
           "Derived from paths.cc [S2] and the GPUDirect RDMA doc [S17]")
H03 = Rule("H03", "P2P forcibly disabled", "HIGH",
           "Remove NCCL_P2P_DISABLE / NCCL_P2P_LEVEL=LOC (also check /etc/nccl.conf, ~/.nccl.conf and container "
           "images); fix the root cause (P04/P05).",
           "env doc (debugging section) [S12]; NCCL #667 [S36]")
H04 = Rule("H04", "IB transport disabled / fell back to sockets", "HIGH",
           "Remove NCCL_IB_DISABLE; fix NCCL_IB_HCA; expose /dev/infiniband (uverbs, rdma_cm) to containers.",
           "env NCCL_IB_DISABLE [S12]; NCCL #1105 [S66]; NVSentinel char-device check [S32]")
H05 = Rule("H05", "Bootstrap/socket interface wrong", "HIGH",
           "Set NCCL_SOCKET_IFNAME==<the routable interface> (exact, with '='), or a prefix present and up on all nodes.",
           "env NCCL_SOCKET_IFNAME [S12]; NCCL #913, #286 [S49][S50]")
H06 = Rule("H06", "GPU ordering / identity confusion", "MED",
           "Name GPUs by UUID or PCI bus id (CUDA_VISIBLE_DEVICES=GPU-<uuid>, Slurm's AutoDetect=nvml), set "
           "CUDA_DEVICE_ORDER=PCI_BUS_ID for jobs that use integer lists, and build per-rank GPU-to-NIC maps from "
           "bus ids.",
           "CUDA env vars doc [S30]; nvidia-smi help index [S29]; cuda-smi README, onnxruntime #28066 [S30b]")
H07 = Rule("H07", "Debug variables left set", "LOW",
           "Remove them, or document why each is needed.",
           "env doc Debugging preamble [S12]; nccl-tests all_reduce.cu [S16]")
X01 = Rule("X01", "sources disagree", "MED",
           "Check which source is right (re-run the commands on the node; prefer lspci/sysfs ancestry for the PCIe "
           "tree and nvidia-smi for NVLink) before acting on findings that depend on it.",
           "domain.md section 1 evaluation notes (prefer sysfs ancestry, cross-check the topo token) and 4.1 joins")
X02 = Rule("X02", "device name unsafe in a shell", "HIGH",
           "Check what produced the report (the agent, the commands it ran, or the pasted text): device names "
           "from the kernel and drivers use letters, digits and _ . : / - only. If the device really has this "
           "name, rename it or write its NCCL setting by hand, quoted.",
           "topoweb: suggested settings are pasted into a shell (apps/domain/shellsafe.py); "
           "env NCCL_IB_HCA, NCCL_SOCKET_IFNAME take device names [S12]")

_DEBUG_VARS = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_BUFFSIZE",
               "NCCL_NTHREADS", "NCCL_SHM_DISABLE", "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ", "NCCL_IB_DISABLE",
               "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_P2P_READ_ENABLE", "NCCL_P2P_NET_CHUNKSIZE")


def _topo_affinity(ctx: Ctx, name: str) -> str | None:
    for g in as_list((ctx.results.get("nvidia_smi_topo") or {}).get("gpus")):
        if isinstance(g, Mapping) and (g.get("name") == name or f"GPU{g.get('index')}" == name):
            return g.get("cpu_affinity")
    return None


def rule_h01(ctx: Ctx) -> list[dict]:
    """H01 Rank pinned away from its GPU.

    Condition: nvidia-smi printed an empty CPU Affinity for a GPU (the capturing process's CPU set
    does not intersect the GPU's local CPUs) while other GPUs show CPUs; NCCL then logs 'Affinity for
    GPU n is empty, ignoring'. MED; LOW when every GPU is empty (container/VM: cannot tell).
    Source: topo.cc L2148-2190 [S3].
    """
    values = {}
    for g in ctx.gpus:
        aff = g.get("cpu_affinity")
        if aff is None:
            aff = _topo_affinity(ctx, g["name"])
        values[g["name"]] = aff
    known = {k: v for k, v in values.items() if v is not None}
    empty = sorted([k for k, v in known.items() if not str(v).strip() or str(v).strip().upper() == "N/A"],
                   key=gpu_sort_key)
    if not empty:
        return []
    if len(empty) == len(known):
        msg = (f"nvidia-smi printed no CPU affinity for any GPU ({join(empty)}): the capture ran in a container or "
               "VM whose CPU set hides the GPUs' local CPUs, so topoweb cannot place GPUs on sockets and NCCL will "
               "ignore GPU affinity for ranks started the same way.")
        return [finding(H01, empty, msg, severity="LOW")]
    msg = (f"{join(empty)} show an empty CPU affinity as seen by the process that ran nvidia-smi: its allowed CPUs do "
           "not include these GPUs' local CPUs. A rank pinned this way has NCCL ignore GPU affinity, and its proxy "
           "and host-staging traffic crosses sockets.")
    return [finding(H01, empty, msg)]


def rule_h02(ctx: Ctx) -> list[dict]:
    """H02 GPU and its NIC on different NUMA nodes.

    Condition: the NIC a GPU uses (``gpu_nic``) has another NUMA node than the GPU, or the path is SYS,
    and no PXN relay is used. MED; HIGH on rail designs (one NIC per GPU). Source: derived [S2][S17].
    """
    far = []
    for r in as_list(ctx.doc.get("gpu_nic")):
        if not isinstance(r, Mapping) or r.get("pxn_via"):
            continue
        gpu, nic = ctx.gpu(str(r.get("gpu"))), ctx.nic(str(r.get("nic")))
        gn, nn = as_int(gpu.get("numa")), as_int(nic.get("numa"))
        cls = normalize_token(r.get("path_class"))
        if (gn is not None and nn is not None and gn != nn) or cls == "SYS":
            far.append((str(r.get("gpu")), str(r.get("nic")), gn, nn))
    if not far:
        return []
    far.sort(key=lambda t: gpu_sort_key(t[0]))
    text = ", ".join(f"{g} (NUMA {gn}) uses {n} (NUMA {nn})" if gn is not None and nn is not None
                     else f"{g} uses {n} across the CPU sockets (SYS)" for g, n, gn, nn in far)
    msg = (f"{text}. Their inter-node traffic crosses the CPU socket link (UPI/xGMI) and GPUDirect RDMA is off "
           "for them (see G01).")
    devices = [g for g, *_ in far] + sorted({n for _, n, _, _ in far})
    return [finding(H02, devices, msg, severity="HIGH" if ctx.rail_design() else "MED")]


def rule_h03(ctx: Ctx) -> list[dict]:
    """H03 P2P forcibly disabled.

    Condition: NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC/0 on a node with NV#, PIX or PXB GPU pairs.
    HIGH. Source: env doc [S12]; NCCL #667 [S36].
    """
    dis = ctx.env.get("NCCL_P2P_DISABLE", "").strip() == "1"
    lvl = ctx.env.get("NCCL_P2P_LEVEL", "").strip().upper()
    if not dis and lvl not in ("LOC", "0"):
        return []
    names = ctx.gpu_names
    good = [(a, b, ctx.pair_class(a, b)) for i, a in enumerate(names) for b in names[i + 1:]
            if nv_count(ctx.pair_class(a, b)) or ctx.pair_class(a, b) in ("PIX", "PXB")]
    if not good:
        return []
    setting = "NCCL_P2P_DISABLE=1" if dis else f"NCCL_P2P_LEVEL={ctx.env['NCCL_P2P_LEVEL']}"
    nvl = any(nv_count(c) for *_, c in good)
    msg = (f"{setting} is set although {len(good)} GPU pair(s) could talk directly"
           + (" over NVLink" if nvl else " through a PCIe switch") +
           ": all intra-node traffic goes through shared host memory instead.")
    gpus = sorted({g for a, b, _ in good for g in (a, b)}, key=gpu_sort_key)
    return [finding(H03, gpus, msg)]


def rule_h04(ctx: Ctx) -> list[dict]:
    """H04 IB transport disabled / fell back to sockets.

    Condition: NCCL_IB_DISABLE=1 while the node has Active HCA ports (HIGH); or every HCA port of the
    node is reported and none is Active (the document's ``network.state`` is ``all_down``): NCCL
    has no IB/RoCE device and uses sockets (CRIT). Source: env [S12]; #1105 [S66].
    """
    net = ctx.doc.get("network") or {}
    if net.get("state") == "all_down" and ctx.env.get("NCCL_IB_DISABLE", "").strip() != "1":
        ports = [n.get("name") for n in ctx.nics]
        return [finding(H04, ports, "Every HCA port of this node is down, so NCCL finds no usable IB/RoCE device "
                                    "(log: \"NET/IB : No device found\") and falls back to TCP sockets "
                                    "(\"Using network Socket\"): inter-node traffic costs CPU and most of the "
                                    "bandwidth, and no GPU has a NIC (see F01 for each port).",
                        severity="CRIT", title="No Active HCA port: NCCL falls back to sockets",
                        fix="Bring the HCA ports up (cable, transceiver, switch port; for InfiniBand a running "
                            "subnet manager), then check ibstat shows State: Active on every compute port.")]
    if ctx.env.get("NCCL_IB_DISABLE", "").strip() != "1":
        return []
    active = [n.get("name") for n in ctx.nics if ctx.nic_active(n)]
    if not active:
        return []
    msg = (f"NCCL_IB_DISABLE=1 is set although {join(active)} are Active: NCCL uses TCP sockets, which cost CPU "
           "and a large share of the bandwidth.")
    return [finding(H04, active, msg)]


def _ifname_match(name: str, value: str) -> bool:
    """NCCL_SOCKET_IFNAME semantics: comma list, prefix match, '=' exact, '^' exclude."""
    v = value.strip()
    exclude = v.startswith("^")
    v = v[1:] if exclude else v
    exact = v.startswith("=")
    v = v[1:] if exact else v
    hit = any((name == t) if exact else name.startswith(t) for t in (x.strip() for x in v.split(",")) if t)
    return not hit if exclude else hit


def rule_h05(ctx: Ctx) -> list[dict]:
    """H05 Bootstrap/socket interface wrong (a hint from one node).

    Condition (host_info): NCCL_SOCKET_IFNAME is set and (a) matches no interface that is up (only
    when the listing covers every interface, ``netdev_scope`` not ``rdma``): HIGH
    (NCCL stops with 'no socket interface found' or hangs at init); or (b) does not select the
    interface of the default route: LOW hint (fine on a dedicated routable network, a hang if the
    chosen interface cannot reach the other nodes). Source: env NCCL_SOCKET_IFNAME [S12]; #913 [S49].
    """
    val = ctx.env.get("NCCL_SOCKET_IFNAME")
    h = ctx.host or {}
    netdevs = h.get("netdevs") if isinstance(h.get("netdevs"), Mapping) else {}
    route = h.get("default_route_netdev")
    if val is None or not (netdevs or route):
        return []
    chosen = [n for n in netdevs if _ifname_match(n, val)]
    up = [n for n in chosen if str(netdevs.get(n, "")).lower() in ("up", "unknown")]
    # Without the agent's --include-nccl-env only RDMA interfaces are listed (netdev_scope "rdma"):
    # an interface NCCL_SOCKET_IFNAME names may exist beyond them, so "matches none" cannot be said.
    if netdevs and not up and h.get("netdev_scope") != "rdma":
        what = (f"matches only {join(chosen)}, which {'is' if len(chosen) == 1 else 'are'} down" if chosen
                else "matches none of this node's interfaces")
        msg = (f"NCCL_SOCKET_IFNAME={val} {what}: NCCL finds no socket interface for bootstrap and stops or hangs "
               "at init." + (f" The default route uses {route}." if route else ""))
        return [finding(H05, [], msg)]
    if route and not _ifname_match(route, val):
        msg = (f"NCCL_SOCKET_IFNAME={val} selects {join(up) or 'an interface'} while the default route uses {route}: "
               "make sure the chosen interface reaches every other node, or NCCL hangs at init.")
        fix = f"If {route} is the routable network, set NCCL_SOCKET_IFNAME=={route}." if is_safe_name(route) else None
        return [finding(H05, [], msg, severity="LOW", fix=fix)]
    return []


def _gpu_models(ctx: Ctx) -> dict[str, tuple[str, str | None]]:
    """{GPU label: (model, bdf)} from the document, else the GPU query, else ``nvidia-smi -q``."""
    out: dict[str, tuple[str, str | None]] = {}
    for g in ctx.gpus:
        if g.get("model") and g.get("name"):
            out[str(g["name"])] = (str(g["model"]), g.get("bdf"))
    for kind, key in (("nvidia_smi_gpus", "name"), ("nvidia_smi_q", "name")):
        for label, r in section_gpus(ctx, kind):
            if r.get(key) and label not in out:
                out[label] = (str(r[key]), r.get("bdf"))
    return out


_NOT_CUDA = re.compile(r"\b(?:AMD|Radeon|Instinct|Intel)\b", re.IGNORECASE)


def _short_model(name: str) -> str:
    return re.sub(r"^(NVIDIA|Tesla)\s+", "", name.strip())


def rule_h06(ctx: Ctx) -> list[dict]:
    """H06 GPU ordering / identity confusion.

    Condition: (a) the node mixes GPU models (the jobs' CUDA_DEVICE_ORDER is not part of a report):
    CUDA's default order (FASTEST_FIRST) then need not be nvidia-smi's PCI order, so integer
    CUDA_VISIBLE_DEVICES lists and per-rank GPU-to-NIC maps built from nvidia-smi indices pick other
    GPUs; (b) ``nvidia-smi -q`` (a complete capture, so indices are known) shows device minor numbers
    (``/dev/nvidiaN``) in another order than the nvidia-smi indices: tools naming GPUs by device file
    and tools using indices disagree about which GPU is which. MED. Source: CUDA env vars [S30];
    nvidia-smi help [S29]; onnxruntime #28066 [S30b].
    """
    out = []
    # CUDA enumerates NVIDIA GPUs only: an AMD GPU beside them does not change CUDA's order
    models = {k: v for k, v in _gpu_models(ctx).items() if not _NOT_CUDA.search(v[0])}
    kinds = sorted({_short_model(m) for m, _ in models.values()})
    if len(kinds) > 1:  # the jobs' CUDA_DEVICE_ORDER never reaches a node report
        listed = "; ".join(f"{label} {_short_model(m)}" + (f" ({bdf})" if bdf else "")
                           for label, (m, bdf) in sorted(models.items(), key=lambda kv: gpu_sort_key(kv[0])))
        msg = (f"This node mixes {join(kinds)} ({listed}). nvidia-smi and NVML number GPUs in PCI bus order, "
               "CUDA by default fastest first (CUDA_DEVICE_ORDER=FASTEST_FIRST), so CUDA device 0 need not be "
               "nvidia-smi GPU0: an integer CUDA_VISIBLE_DEVICES list, or a per-rank GPU-to-NIC map built from "
               "nvidia-smi indices, can pick other GPUs than intended. The jobs' CUDA_DEVICE_ORDER is not reported.")
        out.append(finding(H06, sorted(models, key=gpu_sort_key), msg))
    rows = [(label, g) for label, g in section_gpus(ctx, "nvidia_smi_q")
            if as_int(g.get("index")) is not None and as_int(g.get("minor_number")) is not None]
    moved = [(label, g) for label, g in rows if as_int(g["minor_number"]) != as_int(g["index"])]
    if moved and len(rows) > 1:
        text = ", ".join(f"{gpu_label(ctx, g.get('bdf'), g.get('index'))} ({g.get('bdf')}) is "
                         f"/dev/nvidia{as_int(g['minor_number'])}" for _, g in moved[:8])
        more = f" and {len(moved) - 8} more" if len(moved) > 8 else ""
        msg = (f"nvidia-smi's GPU indices (PCI bus order) and the GPUs' device files differ on {len(moved)} of "
               f"{len(rows)} GPUs: {text}{more}. Anything that names GPUs by /dev/nvidiaN (a Slurm gres.conf File= "
               "list, container device mappings, cgroup device rules) and anything that uses nvidia-smi indices "
               "(CUDA_VISIBLE_DEVICES with CUDA_DEVICE_ORDER=PCI_BUS_ID, NVIDIA_VISIBLE_DEVICES) mean different GPUs "
               "by the same number.")
        out.append(finding(H06, [label for label, _ in moved], msg))
    return out


def rule_h07(ctx: Ctx) -> list[dict]:
    """H07 Debug variables left set.

    Condition: any of NCCL_ALGO, NCCL_PROTO, NCCL_MIN/MAX_NCHANNELS, NCCL_BUFFSIZE, NCCL_NTHREADS,
    NCCL_P2P_*, NCCL_SHM_DISABLE, NCCL_NET_GDR_*, NCCL_IB_DISABLE is set. LOW. Source: env doc [S12].
    """
    found = [f"{k}={v}" for k, v in sorted(ctx.env.items())
             if k in _DEBUG_VARS or k.startswith(("NCCL_P2P_", "NCCL_NET_GDR_"))]
    if not found:
        return []
    msg = (f"Debugging variables are set: {', '.join(found)}. NCCL's docs say these should not be used in production "
           "nor kept in scripts; they can cause slow paths, crashes or hangs after upgrades. NCCL_ALGO=NVLS* also "
           "changes how nccl-tests computes busbw.")
    return [finding(H07, [], msg)]


_DISAGREE = re.compile(r"disagree|conflict|contradict|inconsistent|mismatch|sources differ", re.IGNORECASE)


def rule_x01(ctx: Ctx) -> list[dict]:
    """X01 sources disagree.

    Condition: the engine recorded that two sources of the same host disagree (``graph.disagreements``
    [{"subject", "message", "sources"}], e.g. topo -m says PIX while lspci places the devices under
    separate root ports), or a warning says so. MED. Source: domain.md section 1 evaluation notes, 4.

    One finding per set of sources: every disagreement between the same sources is one sentence of
    that finding's message and its devices are all the devices named (a matrix that says SYS for six
    pairs is one finding listing six pairs, not six). The warnings that say so are one more finding.
    """
    names = set(ctx.gpu_names) | {str(n.get("name")) for n in ctx.nics}
    graph = ctx.doc.get("graph") or {}
    groups: dict[tuple[str, ...], list[tuple[list[str], str]]] = {}
    seen = set()
    for d in as_list(graph.get("disagreements")) + as_list(ctx.doc.get("disagreements")):
        if not isinstance(d, Mapping) or not d.get("message"):
            continue
        msg = str(d["message"])
        if msg in seen:
            continue
        seen.add(msg)
        subject = str(d.get("subject") or "")
        parts = [p for p in re.split(r"[-\s,]+", subject) if p]
        devices = [p for p in parts if p in names] or ([subject] if subject else [])
        sources = tuple(dict.fromkeys(str(s) for s in as_list(d.get("sources"))))
        groups.setdefault(sources, []).append((devices, msg.rstrip(".")))
    out = [_x01_finding(sources, items) for sources, items in groups.items()]
    warned = []
    for w in ctx.warnings():
        if not _DISAGREE.search(w) or w in seen:
            continue
        seen.add(w)
        tokens = {t.rstrip(".:") for t in re.findall(r"[\w:.]+", w)}
        warned.append((sorted(tokens & names, key=gpu_sort_key), w.rstrip(".")))
    if warned:
        out.append(finding(X01, [d for devs, _ in warned for d in devs], _x01_message(warned)))
    return out


def _x01_message(items: list[tuple[list[str], str]], sources: tuple[str, ...] = ()) -> str:
    """One disagreement as its own sentence; several as a count and every one of them numbered
    ("(1) ...; (2) ...": a disagreement's own text may hold a semicolon)."""
    cited = f" (sources: {', '.join(sources)})" if sources else ""
    if len(items) == 1:
        return items[0][1] + cited + "."
    return f"{len(items)} disagreements{cited}: " + "; ".join(f"({k}) {m}" for k, (_, m) in enumerate(items, 1)) + "."


def _x01_finding(sources: tuple[str, ...], items: list[tuple[list[str], str]]) -> dict:
    """The X01 finding of one set of sources; a capture that contradicts itself (fewer than two
    sources) is not two sources disagreeing: LOW, titled so."""
    one = len(sources) < 2
    return finding(X01, [d for devs, _ in items for d in devs], _x01_message(items, sources),
                   title="one capture contradicts itself" if one else None, severity="LOW" if one else None)


def _device_names(ctx: Ctx) -> dict[str, str]:
    """Every device name the host reports, {name: what it names}, first source first: GPUs, NIC
    ports, netdevs of the document's ``nics`` and of the graph's NICs, and ``host_info`` netdevs
    and default route. Labels are not names (an lspci-only NIC's label is its device description,
    spaces and brackets included) and never go into settings."""
    found: list[tuple[str, object]] = [("GPU", g.get("name")) for g in ctx.gpus]
    for n in ctx.nics:
        found.append(("NIC", n.get("name")))
        found += [("network interface", d) for d in as_list(n.get("netdevs"))]
    for node in ctx.nodes.values():
        found += [("network interface", d) for d in as_list((node.get("attrs") or {}).get("netdevs"))]
    netdevs = ctx.host.get("netdevs")
    found += [("network interface", d) for d in (netdevs if isinstance(netdevs, Mapping) else ())]
    found.append(("network interface", ctx.host.get("default_route_netdev")))
    out: dict[str, str] = {}
    for what, name in found:
        if name is not None and str(name) != "":
            out.setdefault(str(name), what)
    return out


def rule_x02(ctx: Ctx) -> list[dict]:
    """X02 device name unsafe in a shell.

    Condition: a GPU, NIC or netdev name has characters outside ``[A-Za-z0-9_.:/-]``
    (``shellsafe.SAFE_NAME``), e.g. an ``ibstat`` ``CA 'mlx5_0;touch${IFS}x;'``. The name stays in
    the document as reported; the suggested settings (``estimate.suggest_nccl_settings``) and the
    fixes of F04/F07 (``fabric.ib_hca_value``) and H05 leave it out. HIGH, one finding per name:
    copied into a shell, such a name runs as a command. Source: topoweb's shell-safety contract (``apps/domain/shellsafe.py``).
    """
    out = []
    for name, what in _device_names(ctx).items():
        if is_safe_name(name):
            continue
        msg = (f"{what} '{printable(name)}' has characters outside letters, digits and _ . : / - in its name; "
               "pasted into a shell, such a name can run as a command. topoweb keeps the name as reported and "
               "leaves it out of the suggested NCCL settings.")
        out.append(finding(X02, [name], msg))
    return out


RULES = [rule_h01, rule_h02, rule_h03, rule_h04, rule_h05, rule_h06, rule_h07, rule_x01, rule_x02]
