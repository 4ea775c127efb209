"""The NVLink stage: GPU-GPU and GPU-NVSwitch links from topo -m ``NV#`` cells, NCCL/RCCL XML
``<nvlink>``/``<xgmi>`` and hwloc's ``NVLinkBandwidth``/``XGMIBandwidth`` matrices. A GPU pair is
stored once, under its natural-order key (:func:`apps.domain.names.pair_key`)."""

from __future__ import annotations

from apps.domain.assemble.report import Report, get_field, get_list, to_bdf, to_float, to_int
from apps.domain.bandwidth import nvlink_per_link
from apps.domain.facts import GpuFact, NvlinkPair
from apps.domain.names import cell, natural_key, natural_sorted, nv_count, pair_key

__all__ = ["gpu_links"]


def gpu_links(rep: Report, topo: dict, gpus: list[GpuFact]) -> list[NvlinkPair]:
    """GPU-GPU and GPU-NVSwitch links from topo -m, NCCL/RCCL XML and hwloc distance matrices."""
    pairs: dict[tuple[str, str], NvlinkPair] = {}  # pair_key (natural order) or (GPU, "nvswitch")
    labels = natural_sorted({x for x in topo if x.startswith("GPU")}
                            | {x for cols in topo.values() for x in cols if x.startswith("GPU")})
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            links = nv_count(cell(topo, a, b))
            if links:
                pairs[(a, b)] = NvlinkPair(a, b, links, "nvidia_smi_topo")
    name_by_bdf = {g.bdf: g.name for g in gpus if g.bdf}
    _xml_links(rep, pairs, name_by_bdf)
    _hwloc_links(rep, pairs, name_by_bdf, gpus)
    return sorted(pairs.values(), key=lambda p: (natural_key(p.a), natural_key(p.b)))


def _xml_links(rep: Report, pairs: dict, name_by_bdf: dict[str, str]) -> None:
    x = rep.results.get("nccl_topo_xml")
    for xg in get_list(x, "gpus"):
        a = name_by_bdf.get(to_bdf(get_field(xg, "bdf")))
        if not a:
            continue
        for fabric, field in (("nvlink", "nvlinks"), ("xgmi", "xgmi_links")):
            for lk in get_list(xg, field):
                tgt = to_bdf(get_field(lk, "target"))
                count = to_int(get_field(lk, "count")) or 1
                target = get_field(lk, "target_kind")  # from the target class: nvswitch, gpu, cpu
                if target == "cpu":
                    continue  # NVLink to a POWER9 CPU: not a GPU-GPU link
                if target == "nvswitch" or (target is None and tgt not in name_by_bdf):
                    prev = pairs.get((a, "nvswitch"))
                    pairs[(a, "nvswitch")] = NvlinkPair(a, "nvswitch", count + (prev.links if prev else 0),
                                                        "nccl_topo_xml", fabric)
                    continue
                b = name_by_bdf.get(tgt)
                if not b or b == a:
                    continue
                key = pair_key(a, b)
                prev = pairs.get(key)
                if prev and prev.source == "nvidia_smi_topo" and prev.links != count:
                    rep.disagree(f"{key[0]}-{key[1]}",
                                  f"topo -m says NV{prev.links} for {key[0]}-{key[1]}, NCCL XML says {count} links",
                                  "nvidia_smi_topo", "nccl_topo_xml")
                elif not prev:
                    pairs[key] = NvlinkPair(key[0], key[1], count, "nccl_topo_xml", fabric)


def _hwloc_links(rep: Report, pairs: dict, name_by_bdf: dict[str, str], gpus: list[GpuFact]) -> None:
    """hwloc's ``NVLinkBandwidth`` (NVML) and ``XGMIBandwidth`` (RSMI) matrices, MB/s per pair.

    Rows and columns are GPU OS devices (``nvml0``, ``rsmi4``) and NVSwitch PCI functions. A
    GPU's NVLink count to a peer is its bandwidth over the GPU model's per-link rate (hwloc
    adds one per-link figure per link); xGMI pairs keep hwloc's bandwidth, which RSMI reports
    per pair rather than per link."""
    h = rep.results.get("hwloc_xml")
    if not h:
        return
    gpu_of: dict[str, str] = {}  # OS device name or BDF -> GPU name
    nvswitch: set[str] = set()
    for dev in get_list(h, "pci_devices"):
        bdf = to_bdf(get_field(dev, "bdf"))
        if get_field(dev, "kind") == "nvswitch":
            nvswitch.add(bdf)
        if bdf in name_by_bdf:
            gpu_of[bdf] = name_by_bdf[bdf]
            for od in get_list(dev, "os_devices"):
                if get_field(od, "name"):
                    gpu_of[get_field(od, "name")] = name_by_bdf[bdf]
    model = next((g.model for g in gpus if g.model), None)
    per_link = (nvlink_per_link(model).spec_gbs or 25.0) * 1000  # MB/s
    for dist in get_list(h, "distances"):
        name = get_field(dist, "name")
        if name not in ("NVLinkBandwidth", "XGMIBandwidth"):
            continue
        labels = get_list(dist, "objects")
        rows = get_list(dist, "values")
        fabric_links: dict[str, int] = {}
        for i, a_label in enumerate(labels):
            a = gpu_of.get(a_label)
            if a is None or i >= len(rows):
                continue
            for j, b_label in enumerate(labels):
                v = to_float(rows[i][j]) if j < len(rows[i]) else None
                if not v or i == j:
                    continue
                if name == "NVLinkBandwidth" and b_label in nvswitch:
                    fabric_links[a] = fabric_links.get(a, 0) + max(1, round(v / per_link))
                    continue
                b = gpu_of.get(b_label)
                if b is None or b == a or pair_key(a, b) != (a, b) or (a, b) in pairs:
                    continue
                if name == "XGMIBandwidth":
                    pairs[(a, b)] = NvlinkPair(a, b, 0, "hwloc_xml", "xgmi", gbs=round(v / 1000, 3))
                else:
                    pairs[(a, b)] = NvlinkPair(a, b, max(1, round(v / per_link)), "hwloc_xml")
        for a, links in fabric_links.items():
            pairs.setdefault((a, "nvswitch"), NvlinkPair(a, "nvswitch", links, "hwloc_xml"))
