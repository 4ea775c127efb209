"""NIC / fabric rules F01, F02, F03, F04, F07 of domain.md section 1d (ibstat, sysfs, RoCE, NCCL_IB_HCA).

Inputs: the document's ``nics`` (state, physical state, rate, link layer, compute), raw port records
of ``ibstat`` / ``ibstatus`` / ``ibv_devinfo`` / ``sysfs_ib`` (LIDs, width) and the NCCL environment
(``nccl_env``) for F04/F07. F05/F06/F08/F09 need GID tables, counters or several nodes.
"""

from __future__ import annotations

import re
from collections import defaultdict

from apps.domain.findings._base import (
    Ctx, Rule, as_float, as_int, finding, gpu_sort_key, fmt_num, hca_selected, join, parse_ib_hca,
)
from apps.domain.shellsafe import is_safe_name

F01 = Rule("F01", "HCA port not Active", "HIGH",
           "Check the cable, transceiver and switch port; start or fix the subnet manager (opensm/UFM); exclude "
           "intentionally unused ports with an exact NCCL_IB_HCA list.",
           "ibstat.c strings [S20]; NCCL init.cc L363 [S8]; NVSentinel NIC checks [S32]; gpud PR #482 [S53]")
F02 = Rule("F02", "Link rate below expectation", "HIGH",
           "Check the cable/transceiver and the switch port speed; compare the same rail on other nodes.",
           "kernel sysfs rate format [S21]; NCCL ibvSpeeds init.cc L116-138, L404-412 [S8]; stas00 IB table [S31]")
F03 = Rule("F03", "IB port without LID / SM", "CRIT",
           "Run or fix the subnet manager (switch-embedded SM, opensm, UFM); SR-IOV VFs need a "
           "virtualization-enabled SM and VF GUIDs.",
           "ibstat.c fields [S20]; network-operator #249 [S54]; SR-IOV device plugin #269 [S54b]")
F04 = Rule("F04", "Mixed link layers in one NCCL net", "CRIT",
           "Restrict NCCL to one link layer with an exact list: NCCL_IB_HCA==<HCAs>.",
           "connect.cc L985-990, L1028-1038 [S10]")
F07 = Rule("F07", "NCCL_IB_HCA selection mistakes", "HIGH",
           "Use an exact list of the compute rails: NCCL_IB_HCA==mlx5_0,mlx5_1,...",
           "env NCCL_IB_HCA [S12]; NCCL #700 [S44]; NCCL #1591 [S44b]")

_PHYS = {
    "polling": "no physical link (cable, transceiver or the peer switch port)",
    "disabled": "administratively disabled (often an unused second port)",
    "linkup": "the cable is fine but no subnet manager has activated the port",
    "linkerrorrecovery": "the link is flapping",
    "sleep": "the port is asleep",
    "portconfigurationtraining": "the link is still training",
}


def _port_name(nic: dict) -> str:
    return str(nic.get("name") or nic.get("label") or "?")


def _port_suffix(nic: dict) -> str:
    port = nic.get("port")
    return f" port {port}" if port not in (None, "") else ""


def rule_f01(ctx: Ctx) -> list[dict]:
    """F01 HCA port not Active.

    Condition: an HCA port's State is not Active (Down/Initializing/Armed). HIGH for compute NICs
    (CRIT when no compute NIC is Active at all: NCCL falls back to sockets), LOW for ports the
    document classifies as non-compute (storage/management). Source: ibstat.c [S20]; init.cc L363 [S8].
    """
    out = []
    any_active = bool(ctx.compute_nics())
    for nic in ctx.nics:
        state = str(nic.get("state") or "")
        if not state or ctx.nic_active(nic):
            continue
        phys = str(nic.get("phys_state") or "")
        why = _PHYS.get(phys.lower().replace(" ", ""), "")
        if not why and state.lower() == "initializing":
            why = "the subnet manager has not activated the port"
        compute = ctx.is_compute(nic)
        sev = "HIGH" if compute else "LOW"
        if compute and not any_active:
            sev = "CRIT"
        name = _port_name(nic)
        msg = (f"{name}{_port_suffix(nic)} is {state}" + (f"/{phys}" if phys else "") + (f": {why}." if why else ".") +
               " NCCL silently skips ports that are not Active, so this port carries no traffic" +
               (" and no other compute NIC is Active: NCCL will fall back to sockets." if sev == "CRIT" else
                " (it is not classified as a compute NIC)." if not compute else
                "; the node loses its bandwidth.") + " Ignore its Rate while it is not Active.")
        out.append(finding(F01, [name], msg, severity=sev))
    return out


def rule_f02(ctx: Ctx) -> list[dict]:
    """F02 Link rate below expectation.

    Condition: among the Active compute ports of one link layer and adapter model (ibstat CA type),
    a port's Rate is below the majority's (the node's slowest rail bounds the rings).
    HIGH. Split ports (HDR100, NDR200) are legitimate when every port is split alike.
    Source: kernel sysfs rate [S21]; NCCL init.cc L116-138, L404-412 [S8].
    """
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for nic in ctx.compute_nics():
        if as_float(nic.get("rate_gbps")):
            ca_type = str(ctx.ib_port(_port_name(nic), nic.get("port")).get("ca_type") or "")
            groups[(str(nic.get("link_layer") or ""), ca_type)].append(nic)
    out = []
    for (layer, _ca_type), nics in groups.items():
        top = max(as_float(n["rate_gbps"]) for n in nics)
        slow = [n for n in nics if as_float(n["rate_gbps"]) < top]
        if not slow or len(slow) * 2 > len(nics):
            continue  # the majority sets the norm; a node-wide lower rate may be a design choice
        for n in slow:
            raw = ctx.ib_port(_port_name(n), n.get("port"))
            width = f" (width {raw['width']})" if raw.get("width") else ""
            msg = (f"{_port_name(n)} trained at {fmt_num(as_float(n['rate_gbps']))} Gb/s{width} while the node's other "
                   f"{layer or 'compute'} ports run at {fmt_num(top)} Gb/s. Ring throughput is set by the slowest rail.")
            out.append(finding(F02, [_port_name(n)], msg))
    return out


def rule_f03(ctx: Ctx) -> list[dict]:
    """F03 IB port without LID / SM.

    Condition: ``Link layer: InfiniBand`` with Base lid 0 or 65535, or SM lid 0, while the physical
    link is up (a port with no link is F01 only). RoCE ports (Ethernet) always show LID 0: not a fault.
    CRIT for that port. Source: ibstat.c [S20]; network-operator #249 [S54].
    """
    out = []
    for nic in ctx.nics:
        name = _port_name(nic)
        raw = ctx.ib_port(name, nic.get("port"))
        layer = str(nic.get("link_layer") or raw.get("link_layer") or "")
        if layer.lower() != "infiniband":
            continue
        phys = str(nic.get("phys_state") or raw.get("phys_state") or "").lower()
        state = str(nic.get("state") or raw.get("state") or "").lower()
        if phys not in ("linkup", "") and state != "active":
            continue
        if phys == "" and state in ("down", ""):
            continue
        lid, sm = as_int(raw.get("base_lid")), as_int(raw.get("sm_lid"))
        if lid is None and sm is None:
            continue
        bad = []
        if lid in (0, 65535):
            bad.append(f"Base lid {lid}" + (" (unassigned)" if lid == 65535 else ""))
        if sm == 0:
            bad.append("SM lid 0")
        if not bad:
            continue
        msg = (f"{name}{_port_suffix(nic)} is an InfiniBand port with {join(bad)}: no subnet manager has assigned it "
               "an address, so it cannot go Active. (On RoCE ports LID 0 is normal; this one is InfiniBand.)")
        out.append(finding(F03, [name], msg))
    return out


def ib_hca_value(nics: list[dict]) -> str:
    """Exact NCCL_IB_HCA value (``=mlx5_0,mlx5_1``) for ``nics``; ports named when an HCA has several.

    HCAs whose names are unsafe in a shell (``unsafe_hcas``, rule X02) are left out; '' when no
    HCA is left (never a bare ``=``, which would select nothing)."""
    per_hca: dict[str, list] = defaultdict(list)
    for n in nics:
        # NCCL_IB_HCA filters NCCL's IB verbs devices by name: not libfabric NICs (EFA, Slingshot)
        # and not RDMA functions the report names by PCI address only (node ids "pci:<bdf>")
        if is_safe_name(_port_name(n)) and n.get("transport", "verbs") == "verbs" \
                and not _port_name(n).startswith("pci:"):
            per_hca[_port_name(n)].append(n.get("port"))
    if not per_hca:
        return ""
    parts = []
    for name in sorted(per_hca, key=lambda s: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]):
        ports = [p for p in per_hca[name] if p not in (None, "")]
        parts += [f"{name}:{p}" for p in ports] if len(ports) > 1 or (ports and _multi_port(name, nics)) else [name]
    return "=" + ",".join(parts)


def unsafe_hcas(nics: list[dict]) -> list[str]:
    """Names of ``nics`` that ``ib_hca_value`` leaves out: outside ``shellsafe.SAFE_NAME`` (X02)."""
    return sorted({_port_name(n) for n in nics if not is_safe_name(_port_name(n))})


def _multi_port(name: str, nics: list[dict]) -> bool:
    return sum(1 for n in nics if _port_name(n) == name) > 1


def preferred_layer(ctx: Ctx) -> tuple[str, list[dict]]:
    """The link layer carrying the most compute bandwidth, and its Active compute ports."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for n in ctx.compute_nics():
        groups[str(n.get("link_layer") or "")].append(n)
    if not groups:
        return "", []
    layer = max(groups, key=lambda k: (sum(as_float(n.get("rate_gbps")) or 0 for n in groups[k]),
                                       k == "InfiniBand"))
    return layer, groups[layer]


def _selected(ctx: Ctx, nics: list[dict]) -> list[dict]:
    val = ctx.env.get("NCCL_IB_HCA")
    if val is None:
        return nics
    mode, entries = parse_ib_hca(val)
    return [n for n in nics if hca_selected(_port_name(n), n.get("port"), mode, entries)]


def rule_f04(ctx: Ctx) -> list[dict]:
    """F04 Mixed link layers in one NCCL net.

    Condition: the HCAs NCCL will use (NCCL_IB_HCA when reported, else every Active RDMA port, NCCL's
    default) include both InfiniBand and Ethernet (RoCE) ports. CRIT when NCCL_IB_HCA is known to
    select both; HIGH when NCCL_IB_HCA was not reported (a filter may already exclude one layer).
    Source: connect.cc L985-990, L1028-1038 [S10].
    """
    active = [n for n in ctx.nics if ctx.nic_active(n)]
    chosen = _selected(ctx, active)
    layers = defaultdict(list)
    for n in chosen:
        if n.get("link_layer"):
            layers[str(n["link_layer"])].append(_port_name(n))
    for v in layers.values():
        v.sort(key=gpu_sort_key)
    if len(layers) < 2:
        return []
    layer, keep = preferred_layer(ctx)
    value = ib_hca_value(keep) or "=<HCAs of one link layer>"
    known = "NCCL_IB_HCA" in ctx.env
    desc = "; ".join(f"{k}: {join(v)}" for k, v in sorted(layers.items()))
    msg = (f"NCCL would use ports of two link layers ({desc})" +
           (f" with NCCL_IB_HCA={ctx.env['NCCL_IB_HCA']}" if known else " if NCCL_IB_HCA is left unset") +
           ". NCCL refuses to connect queue pairs across link layers ('Attempted to connect incompatible devices').")
    devices = sorted((d for v in layers.values() for d in v), key=gpu_sort_key)
    return [finding(F04, devices, msg, severity="CRIT" if known else "HIGH",
                    fix=f"Restrict NCCL to the {layer or 'main'} ports: NCCL_IB_HCA={value}")]


def rule_f07(ctx: Ctx) -> list[dict]:
    """F07 NCCL_IB_HCA selection mistakes.

    Condition (only when NCCL_IB_HCA is reported): (a) no ``=`` and a token is a prefix of other HCA
    names (``mlx5_1`` also matches ``mlx5_10``); (b) one HCA selected on a node with several Active
    compute HCAs; (c) it selects Down or non-compute ports; (d) it matches nothing. HIGH.
    Source: env NCCL_IB_HCA [S12]; NCCL #700 [S44]; #1591 [S44b].
    """
    val = ctx.env.get("NCCL_IB_HCA")
    if val is None:
        return []
    mode, entries = parse_ib_hca(val)
    names = sorted({_port_name(n) for n in ctx.nics})
    problems, devices = [], []
    if "=" not in mode:
        for ent, _p in entries:
            extra = [n for n in names if n != ent and n.startswith(ent)]
            if extra:
                problems.append(f"'{ent}' is matched as a prefix and also selects {join(extra)}")
                devices += extra
    selected = [n for n in ctx.nics if hca_selected(_port_name(n), n.get("port"), mode, entries)]
    compute = ctx.compute_nics()
    if not selected:
        problems.append("it matches none of the node's HCAs, so NCCL falls back to sockets")
    elif len({_port_name(n) for n in selected if ctx.nic_active(n)}) == 1 and len({_port_name(n) for n in compute}) > 1:
        problems.append(f"it selects a single HCA on a node with {len(compute)} active compute NICs "
                        f"(bandwidth divided by {len(compute)})")
    bad = [n for n in selected if not ctx.nic_active(n) or not ctx.is_compute(n)]
    if bad:
        problems.append(f"it includes ports that are Down or not compute NICs: {join(sorted({_port_name(n) for n in bad}))}")
        devices += [_port_name(n) for n in bad]
    if not problems:
        return []
    _layer, keep = preferred_layer(ctx)
    value = ib_hca_value(keep) or None
    msg = f"NCCL_IB_HCA={val}: " + "; ".join(problems) + "."
    fix = f"Use the exact list of compute rails: NCCL_IB_HCA={value}" if value else None
    return [finding(F07, devices, msg, fix=fix)]


RULES = [rule_f01, rule_f02, rule_f03, rule_f04, rule_f07]
