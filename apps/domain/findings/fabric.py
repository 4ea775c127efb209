"""NIC / fabric rules F01-F07 and F09 of domain.md section 1d (ibstat, sysfs, RoCE, NCCL_IB_HCA, counters).

Inputs: the document's ``nics`` (state, physical state, rate, link layer, compute), raw port records
of ``ibstat`` / ``ibstatus`` / ``ibv_devinfo`` / ``sysfs_ib`` (LIDs, width, GIDs) and the NCCL environment
(``nccl_env``) for F04/F05/F07; ``show_gids`` and the ``sysfs_ib`` GID table for F05; the agent's
``ib_counters`` listing for F06 and F09. F08 compares several nodes: ``apps/domain/fleet_rules.py``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping

from apps.domain.findings.base import (
    Ctx, Rule, as_float, as_int, as_list, finding, gpu_sort_key, fmt_num, hca_selected, join, parse_ib_hca,
)
from apps.domain.parsers.show_gids import gid_family
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
F05 = Rule("F05", "RoCE GID problem", "CRIT",
           "Leave NCCL_IB_GID_INDEX unset where every RoCE port has a RoCE v2 IPv4 GID (NCCL then picks it); "
           "otherwise give the port's interface its IPv4 address, or set NCCL_IB_GID_INDEX to the RoCE v2 index of "
           "the routable address (often 3) on every node alike, or NCCL_IB_ADDR_FAMILY=AF_INET6 on an IPv6-only "
           "network; keep ports that carry no job traffic out with an exact NCCL_IB_HCA list.",
           "connect.cc L213-330 (auto selection) [S10]; env doc GID vars [S12]; NCCL #426, #769 [S45][S46]; "
           "uccl #803 [S57]; show_gids script [S23]; kernel ABI gid_attrs [S22]")
F06 = Rule("F06", "RoCE fabric not lossless/ECN (advisory)", "MED",
           "Check that PFC (or ECN with DCQCN) is configured end to end for the traffic class RoCE uses, on the "
           "switches and the hosts; align NCCL_IB_TC with the switch QoS class; validate with perftest "
           "(ib_write_bw) between two nodes, and compare two counter samples taken during a job.",
           "env NCCL_IB_TC, NCCL_IB_ADAPTIVE_ROUTING [S12]; NVSentinel counter list/thresholds [S32]; "
           "NCCL #394 counters [S33b]")
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


# ------------------------------------------------------------------------------------------------
# RoCE GIDs (F05)

F09 = Rule("F09", "IB link error counters", "HIGH",
           "Replace the cable or transceiver of that port and check the switch port at the other end (its own "
           "counters); then clear the counters (perfquery -R) and read them again after a day of jobs.",
           "NVSentinel counter profiles [S32]")

_VERSION_OF_TYPE = {"ib/roce v1": "v1", "roce v2": "v2", "v1": "v1", "v2": "v2"}


def gid_tables(ctx: Ctx) -> dict[tuple[str, int], dict[int, dict]]:
    """``{(CA, port): {GID index: {"gid", "family", "version", "netdev", "ipv4"}}}`` from ``show_gids``
    and the ``sysfs_ib`` GID table (the same sysfs files; show_gids first)."""
    out: dict[tuple[str, int], dict[int, dict]] = {}
    for e in as_list((ctx.results.get("show_gids") or {}).get("gids")):
        if isinstance(e, Mapping) and e.get("ca") and as_int(e.get("port")) is not None:
            out.setdefault((str(e["ca"]), as_int(e["port"])), {}).setdefault(as_int(e.get("index")), {
                "gid": e.get("gid"), "family": e.get("family"), "version": e.get("version"),
                "netdev": e.get("netdev"), "ipv4": e.get("ipv4")})
    for ca in as_list((ctx.results.get("sysfs_ib") or {}).get("cas")):
        if not isinstance(ca, Mapping):
            continue
        for p in as_list(ca.get("ports")):
            if not isinstance(p, Mapping) or as_int(p.get("number")) is None:
                continue
            for g in as_list(p.get("gids")):
                if not isinstance(g, Mapping) or not g.get("gid"):
                    continue
                try:
                    family = gid_family(str(g["gid"]))
                except ValueError:
                    continue
                version = _VERSION_OF_TYPE.get(str(g.get("type") or "").strip().lower())
                out.setdefault((str(ca.get("name")), as_int(p["number"])), {}).setdefault(as_int(g.get("index")), {
                    "gid": g["gid"], "family": family, "version": version, "netdev": g.get("ndev"), "ipv4": None})
    return out


def _port_facts(ctx: Ctx, ca: str, port: int) -> tuple[str, str]:
    """(link layer, state) of an RDMA port as far as any section reports it ('' when not)."""
    raw = ctx.ib_port(ca, port)
    nic = next((n for n in ctx.nics if _port_name(n) == ca and as_int(n.get("port")) in (None, port)), {})
    layer = str(raw.get("link_layer") or nic.get("link_layer") or "")
    state = str(raw.get("state") or nic.get("state") or "")
    return layer, state


def _gid_words(table: dict[int, dict]) -> str:
    """``GID 0 (v1, link-local) and GID 1 (v2, link-local)``."""
    return join(f"GID {i} ({rec.get('version') or 'version not reported'}, "
                f"{str(rec.get('family') or 'family unknown').replace('_', '-')})" for i, rec in sorted(table.items()))


def rule_f05(ctx: Ctx) -> list[dict]:
    """F05 RoCE GID problem.

    Condition, per RoCE port (link layer Ethernet; without a reported link layer, a port whose GIDs
    carry a network interface, which only RoCE GIDs do) that NCCL may use (NCCL_IB_HCA when set; a
    port known to be Down is F01's): (a) NCCL_IB_GID_INDEX unset and no GID of the family and RoCE
    version NCCL picks by default (``NCCL_IB_ADDR_FAMILY`` AF_INET, ``NCCL_IB_ROCE_VERSION_NUM`` 2):
    NCCL falls back to a link-local GID and connections time out; (b) NCCL_IB_GID_INDEX set and the
    GID there is missing, RoCE v1, link-local, or not of the address family in use. CRIT for Active
    ports (and for (b)); HIGH when the port's state is not reported. Source: connect.cc L213-330 [S10];
    env doc [S12]; NCCL #426, #769 [S45][S46]; show_gids [S23].
    """
    tables = gid_tables(ctx)
    if not tables:
        return []
    hca = ctx.env.get("NCCL_IB_HCA")
    mode, entries = parse_ib_hca(hca) if hca is not None else ("", [])
    fixed = as_int(ctx.env.get("NCCL_IB_GID_INDEX"))
    fixed = fixed if fixed is not None and fixed >= 0 else None
    family = "ipv6" if ctx.env.get("NCCL_IB_ADDR_FAMILY", "").strip().upper() == "AF_INET6" else "ipv4"
    version = "v1" if ctx.env.get("NCCL_IB_ROCE_VERSION_NUM", "").strip() == "1" else "v2"
    wanted = f"RoCE {version} {'IPv6' if family == 'ipv6' else 'IPv4'}"
    bad: dict[str, list[tuple[str, int, str]]] = {}
    good: list[tuple[str, int, int]] = []
    inferred = False
    for (ca, port), table in sorted(tables.items(), key=lambda kv: (gpu_sort_key(kv[0][0]), kv[0][1])):
        layer, state = _port_facts(ctx, ca, port)
        if layer.lower() == "infiniband":
            continue
        if not layer:
            if not any(rec.get("netdev") for rec in table.values()):
                continue  # InfiniBand GIDs have no network interface: not a RoCE port
            inferred = True
        if state.lower() == "down" or (hca is not None and not hca_selected(ca, port, mode, entries)):
            continue
        netdev = next((rec["netdev"] for rec in table.values() if rec.get("netdev")), None)
        name = f"{ca} port {port}" + (f" ({netdev})" if netdev else "")
        sev = "CRIT" if state.lower() == "active" else "HIGH"
        ok = [i for i, rec in sorted(table.items()) if rec.get("family") == family and rec.get("version") == version]
        if fixed is not None:
            rec = table.get(fixed)
            why = (f"has no GID at index {fixed}" if rec is None else
                   f"holds a link-local GID at index {fixed} (never routed)" if rec.get("family") == "link_local" else
                   f"holds a RoCE v1 GID at index {fixed}" if rec.get("version") == "v1" and version == "v2" else
                   f"holds an {'IPv6' if rec.get('family') == 'ipv6' else 'IPv4'} GID at index {fixed}"
                   if rec.get("family") != family else "")
            if why:
                hint = (f" (its {wanted} GID is index {join(map(str, ok), 'or')})" if ok
                        else f" and no {wanted} GID at all")
                bad.setdefault("CRIT", []).append((name, port, f"{name} {why}{hint}"))
            elif ok:
                good.append((ca, port, fixed))
            continue
        if ok:
            good.append((ca, port, ok[0]))
            continue
        bad.setdefault(sev, []).append((name, port, f"{name} has only {_gid_words(table)}"))
    out = []
    for sev, rows in sorted(bad.items()):
        devices = [n.split(" port ")[0] for n, _, _ in rows]
        details = "; ".join(text for _, _, text in rows)
        if fixed is not None:
            msg = (f"NCCL_IB_GID_INDEX={fixed} is set, but {details}. NCCL uses that index on every RoCE port, so "
                   "queue pairs on these ports cannot connect: the first transfer times out ('ibv_modify_qp ... "
                   "Connection timed out', completion error 12).")
        else:
            msg = (f"No routable {wanted} GID: {details}. With NCCL_IB_GID_INDEX unset NCCL looks for the first "
                   f"non-link-local {wanted} GID and, finding none, falls back to a link-local one: connections over "
                   "these ports time out ('ibv_modify_qp ... Connection timed out', completion error 12). An "
                   "interface without an IPv4 address gives only its two link-local GIDs.")
        if sev == "HIGH":
            msg += (" The ports' state was not reported (send ibstat or the agent's sysfs_ib listing): if they are "
                    "Down they carry nothing; if Active, this is CRIT.")
        if inferred:
            msg += " (RoCE read from the GIDs' network interfaces; the link layer was not reported.)"
        fix = None
        if good:
            keep = [{"name": ca, "port": port} for ca, port, _ in good]
            idx = sorted({i for *_, i in good})
            value = ib_hca_value(keep)
            fix = (F05.fix + f" Here {join(sorted({ca for ca, _, _ in good}, key=gpu_sort_key))} have theirs at "
                   f"index {join(map(str, idx), 'and')}" + (f"; to use only them: NCCL_IB_HCA={value}." if value else "."))
        out.append(finding(F05, devices, msg, severity=sev, fix=fix))
    return out


# ------------------------------------------------------------------------------------------------
# counters (F06, F09)

# hw_counters that count lost or reordered RoCE packets and retransmission timeouts (mlx5 names)
ROCE_LOSS_COUNTERS = ("out_of_sequence", "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err",
                      "roce_adp_retrans", "roce_slow_restart")
# NVSentinel: any increment of these is fatal (domain.md F09)
_FATAL = ("link_downed", "excessive_buffer_overrun_errors", "local_link_integrity_errors")
_FATAL_HW = ("rnr_nak_retry_err",)
# physical-layer errors judged by rate: counter -> (per seconds, threshold, words)
_RATED = {"symbol_error": (3600.0, 120, "per hour"), "link_error_recovery": (60.0, 5, "per minute")}
_OTHER = ("port_rcv_errors", "port_rcv_remote_physical_errors")
# Every IB port counter F09 reads (the run causes quote the same ones), and the hw_counter it adds
LINK_ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                       "port_rcv_remote_physical_errors", "local_link_integrity_errors", "excessive_buffer_overrun_errors")
LINK_ERROR_HW_COUNTERS = _FATAL_HW
assert set(LINK_ERROR_COUNTERS) == {*_FATAL, *_RATED, *_OTHER}


def _counter_ports(ctx: Ctx) -> tuple[list[dict], float | None]:
    res = ctx.results.get("ib_counters") or {}
    ports = [p for p in as_list(res.get("ports")) if isinstance(p, Mapping) and p.get("ca")]
    up = as_float(res.get("uptime_s"))
    return ports, up if up and up > 0 else None


def _port_layer_state(ctx: Ctx, p: Mapping) -> tuple[str, str]:
    layer, state = _port_facts(ctx, str(p["ca"]), as_int(p.get("port")) or 1)
    return str(p.get("link_layer") or layer), str(p.get("state") or state)


def _uptime_words(up: float | None) -> str:
    if up is None:
        return "since the counters were last cleared (the uptime was not reported)"
    days = up / 86400
    return (f"in at most {days:.1f} days (the host's uptime; the counters run from driver load or their last reset)"
            if days >= 1 else f"in at most {up / 3600:.1f} hours (the host's uptime)")


def rule_f06(ctx: Ctx) -> list[dict]:
    """F06 RoCE fabric not lossless/ECN (advisory).

    Condition (the agent's ``ib_counters``): a RoCE port (link layer Ethernet) whose driver counters of
    lost or reordered packets and retransmission timeouts (``out_of_sequence``, ``packet_seq_err``,
    ``implied_nak_seq_err``, ``local_ack_timeout_err``, ``roce_adp_retrans``, ``roce_slow_restart``)
    are above zero. MED, advisory: one sample cannot tell whether they still rise under load, and
    without counters nothing is said (unverified is not a finding). Source: env NCCL_IB_TC [S12];
    NVSentinel [S32]; NCCL #394 [S33b].
    """
    ports, up = _counter_ports(ctx)
    out = []
    for p in ports:
        layer, _state = _port_layer_state(ctx, p)
        if layer.lower() != "ethernet":
            continue
        hw = p.get("hw_counters") if isinstance(p.get("hw_counters"), Mapping) else {}
        seen = [(k, as_int(hw.get(k))) for k in ROCE_LOSS_COUNTERS if as_int(hw.get(k))]
        if not seen:
            continue
        name = f"{p['ca']} port {as_int(p.get('port'))}"
        counts = ", ".join(f"{k} {n}" for k, n in seen)
        msg = (f"{name} (RoCE) counted {counts} {_uptime_words(up)}. These count packets the fabric lost or "
               "delivered out of order and the retransmissions that followed: the sign of a RoCE network that is not "
               "lossless (PFC or ECN/DCQCN missing or mismatched for the traffic class in use), which silently cuts "
               "throughput. A second sample taken under load tells whether they still rise.")
        out.append(finding(F06, [str(p["ca"])], msg))
    return out


def rule_f09(ctx: Ctx) -> list[dict]:
    """F09 IB link error counters.

    Condition (the agent's ``ib_counters``; ports known to be Down are F01's): NVSentinel's fatal
    counters ``link_downed``, ``excessive_buffer_overrun_errors``, ``local_link_integrity_errors`` or
    ``rnr_nak_retry_err`` above zero, or ``symbol_error`` at least 120 per hour / ``link_error_recovery``
    at least 5 per minute on average over the host's uptime (a lower bound of the real rate): HIGH.
    Other physical-layer errors (those two below their thresholds, ``port_rcv_errors``,
    ``port_rcv_remote_physical_errors``): MED when the uptime is not reported, LOW when it shows the
    average under NVSentinel's thresholds. Source: NVSentinel counter profiles [S32].
    """
    ports, up = _counter_ports(ctx)
    out = []
    for p in ports:
        _layer, state = _port_layer_state(ctx, p)
        if state.lower() == "down":
            continue
        c = p.get("counters") if isinstance(p.get("counters"), Mapping) else {}
        hw = p.get("hw_counters") if isinstance(p.get("hw_counters"), Mapping) else {}
        fatal = [(k, as_int(c.get(k))) for k in _FATAL if as_int(c.get(k))]
        fatal += [(k, as_int(hw.get(k))) for k in _FATAL_HW if as_int(hw.get(k))]
        over, under = [], []
        for k, (per, limit, words) in _RATED.items():
            n = as_int(c.get(k))
            if not n:
                continue
            if up is not None and n / (up / per) >= limit:
                over.append(f"{k} {n} (at least {n / (up / per):.1f} {words} on average; NVSentinel: {limit} "
                            f"{words} is fatal)")
            else:
                under.append(f"{k} {n}")
        under += [f"{k} {as_int(c.get(k))}" for k in _OTHER if as_int(c.get(k))]
        if not (fatal or over or under):
            continue
        name = f"{p['ca']} port {as_int(p.get('port'))}"
        parts = [f"{k} {n}" for k, n in fatal] + over + under
        if fatal or over:
            sev = "HIGH"
            tail = (" The link went down or corrupted packets beyond what NVSentinel tolerates: expect "
                    "retransmissions, flaps and NCCL timeouts without any change in topology."
                    if fatal else " Physical-layer errors at this rate mean retransmissions and NCCL timeouts.")
        else:
            sev = "LOW" if up is not None else "MED"
            tail = (" On average that stays under NVSentinel's thresholds: watch whether it rises."
                    if up is not None else " Without the uptime the rate is unknown: compare two samples.")
        msg = f"{name} counted {', '.join(parts)} {_uptime_words(up)}." + tail
        out.append(finding(F09, [str(p["ca"])], msg, severity=sev))
    return out


RULES = [rule_f01, rule_f02, rule_f03, rule_f04, rule_f05, rule_f06, rule_f07, rule_f09]
