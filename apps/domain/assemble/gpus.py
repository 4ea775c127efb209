"""The GPU join stage (domain.md 4.2 join 1): ``GPU<i>`` of topo -m <-> nvidia-smi index <-> BDF
<-> UUID.

``nvidia-smi --query-gpu=index,uuid,pci.bus_id,...`` joins them; without it GPU BDFs come from
NCCL XML ``<gpu dev=i>`` (CUDA device order, assumed equal to nvidia-smi order) or, as a last
resort, from the GPU functions of the PCI listing in bus order (nvidia-smi's order). topo -m
gives each GPU its affinity columns, ``nvidia-smi nvlink -s`` its link counts and rates; a GPU
without an nvidia-smi model takes one from the PCI listing (:func:`models_from_pci`).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from apps.domain import devices
from apps.domain.assemble.listing import is_gpu
from apps.domain.assemble.report import Report, get_field, get_list, to_bdf, to_bool, to_float, to_int, to_numa
from apps.domain.assemble.topo import Topo
from apps.domain.facts import GpuFact

__all__ = ["join_gpus", "models_from_pci"]


def join_gpus(rep: Report, topo: Topo, pci: dict[str, dict]) -> list[GpuFact]:
    """One :class:`GpuFact` per GPU any source names, in index order."""
    by_name: dict[str, dict] = {}  # GPU<i> -> fields gathered so far
    _from_topo(by_name, topo)
    _from_query(rep, by_name)
    _from_nccl_xml(rep, by_name)
    _from_bus_order(rep, by_name, pci)
    _from_nvlink(rep, by_name)
    return [_gpu_fact(rep, name, g, pci) for name, g in sorted(by_name.items(), key=lambda kv: kv[1]["index"])]


def _from_topo(by_name: dict[str, dict], topo: Topo) -> None:
    for label in topo.labels:
        if re.fullmatch(r"GPU\d+", label):
            by_name.setdefault(label, {"index": int(label[3:])})
    for name, row in topo.gpu_rows.items():
        g = by_name.setdefault(name, {"index": int(name[3:]) if name[3:].isdigit() else len(by_name)})
        g["cpu_affinity"] = get_field(row, "cpu_affinity")
        numa_text = str(get_field(row, "numa_affinity", default="")).strip()
        g["numa"] = int(numa_text) if numa_text.isdigit() else None  # "0-3" (NPS4 ranges): unknown
        g["gpu_numa_id"] = to_numa(get_field(row, "gpu_numa_id"))


def _from_query(rep: Report, by_name: dict[str, dict]) -> None:
    for row in get_list(rep.results.get("nvidia_smi_gpus"), "gpus"):
        idx = to_int(get_field(row, "index"))
        if idx is None:
            continue
        g = by_name.setdefault(f"GPU{idx}", {"index": idx})
        g.update({
            "bdf": to_bdf(get_field(row, "bdf")),
            "uuid": get_field(row, "uuid"),
            "model": get_field(row, "name"),
            "compute_cap": get_field(row, "compute_cap"),
            "pstate": get_field(row, "pstate"),
            "link_gen_current": to_int(get_field(row, "link_gen_current")),
            # pcie.link.gen.max is what GPU and system allow; the GPU's own maximum when absent
            "link_gen_max": to_int(get_field(row, "link_gen_max")) or to_int(get_field(row, "link_gen_gpu_max")),
            "link_gen_host_max": to_int(get_field(row, "link_gen_host_max")),
            "link_width_current": to_int(get_field(row, "link_width_current")),
            "link_width_max": to_int(get_field(row, "link_width_max")),
        })


def _from_nccl_xml(rep: Report, by_name: dict[str, dict]) -> None:
    """NCCL XML GPUs (dev = CUDA index): BDFs when the query is missing, SM, GDR and C2C."""
    for xg in get_list(rep.results.get("nccl_topo_xml"), "gpus"):
        idx = to_int(get_field(xg, "dev"))
        bdf = to_bdf(get_field(xg, "bdf"))
        if idx is None or not bdf:
            continue
        g = by_name.setdefault(f"GPU{idx}", {"index": idx})
        if not g.get("bdf"):
            g["bdf"] = bdf
        elif g["bdf"] != bdf:
            rep.disagree(f"GPU{idx}", f"NCCL XML dev {idx} is {bdf}, nvidia-smi says {g['bdf']}",
                         "nccl_topo_xml", "nvidia_smi_gpus")
        if not g.get("compute_cap") and get_field(xg, "sm"):
            sm = to_int(get_field(xg, "sm"))
            g["compute_cap"] = f"{sm // 10}.{sm % 10}" if sm else None
        g["gdr"] = to_bool(get_field(xg, "gdr"))
        if get_list(xg, "c2c"):
            g["c2c"] = True  # NCCL's <c2c> element: the GPU reaches its CPU over NVLink-C2C


def _from_bus_order(rep: Report, by_name: dict[str, dict], pci: dict[str, dict]) -> None:
    """Last resort: GPU functions in bus order = nvidia-smi index order."""
    gpu_bdfs = sorted(b for b, d in pci.items() if is_gpu(d))
    if not gpu_bdfs or any(g.get("bdf") for g in by_name.values()):
        return
    if not by_name or len(by_name) == len(gpu_bdfs):
        for i, bdf in enumerate(gpu_bdfs):
            by_name.setdefault(f"GPU{i}", {"index": i})["bdf"] = bdf
        rep.warnings.append(
            "GPU index <-> PCI address taken from PCI bus order (no nvidia-smi --query-gpu): "
            "nvidia-smi enumerates in bus order, so this holds unless devices are hidden"
        )
    else:
        rep.warnings.append(
            f"{len(gpu_bdfs)} NVIDIA GPUs in the PCI listing but {len(by_name)} in nvidia-smi: "
            "cannot join GPU indexes to PCI addresses"
        )


def _from_nvlink(rep: Report, by_name: dict[str, dict]) -> None:
    """``nvidia-smi nvlink -s``: links listed, active, and the active links' raw rates."""
    for row in get_list(rep.results.get("nvidia_smi_nvlink"), "gpus"):
        idx = to_int(get_field(row, "index"))
        if idx is None:
            continue
        g = by_name.setdefault(f"GPU{idx}", {"index": idx})
        links = get_list(row, "links")
        active = [lk for lk in links if get_field(lk, "active", default=False)]
        g["nvlink_total"] = len(links)
        g["nvlink_active"] = len(active)
        g["nvlink_link_gbps"] = tuple(v for v in (to_float(get_field(lk, "gbps")) for lk in active) if v is not None)
        if not g.get("uuid"):
            g["uuid"] = get_field(row, "uuid")
        if not g.get("model"):
            g["model"] = get_field(row, "name")


def _gpu_fact(rep: Report, name: str, g: dict[str, Any], pci: dict[str, dict]) -> GpuFact:
    """The GPU's fields, its PCI function filling NUMA node, links and local CPUs."""
    bdf = g.get("bdf")
    dev = pci.get(bdf) if bdf else None
    numa = g.get("numa")
    if dev and dev.get("numa") is not None:
        if numa is not None and numa != dev["numa"]:
            rep.disagree(name, f"topo -m NUMA affinity {numa} for {name}, PCI numa_node {dev['numa']}",
                         "nvidia_smi_topo", dev["sources"][0])
        numa = dev["numa"]
    if dev and g.get("link_width_current") is None:
        g["link_width_current"], g["link_width_max"] = dev.get("width"), dev.get("max_width")
        g["link_gen_current"], g["link_gen_max"] = dev.get("gen"), dev.get("max_gen")
    return GpuFact(
        index=g["index"], name=f"GPU{g['index']}", bdf=bdf, uuid=g.get("uuid"), model=g.get("model"),
        numa=numa, cpu_affinity=g.get("cpu_affinity") or (dev or {}).get("local_cpulist"),
        compute_cap=g.get("compute_cap"), pstate=g.get("pstate"),
        link_gen_current=g.get("link_gen_current"), link_gen_max=g.get("link_gen_max"),
        link_gen_host_max=g.get("link_gen_host_max"), link_width_current=g.get("link_width_current"),
        link_width_max=g.get("link_width_max"), nvlink_active=g.get("nvlink_active"),
        nvlink_total=g.get("nvlink_total"), nvlink_link_gbps=tuple(g.get("nvlink_link_gbps") or ()),
        gdr=g.get("gdr"), gpu_numa_id=g.get("gpu_numa_id"),
        # topo -m "GPU NUMA ID": GPU memory is a NUMA node of its own, which only coherent
        # NVLink-C2C platforms (Grace Hopper / Grace Blackwell) expose to x86-free hosts
        c2c=bool(g.get("c2c")) or g.get("gpu_numa_id") is not None,
    )


def models_from_pci(rep: Report, gpus: list[GpuFact], merged: dict[str, dict]) -> list[GpuFact]:
    """GPUs without an nvidia-smi model: hwloc's ``GPUModel`` (NVML/RSMI), the lspci name's
    bracketed model, or the PCI device id, in that order; a warning names where it came from."""
    out, said = [], {}
    for g in gpus:
        d = merged.get(g.bdf) if g.bdf else None
        if g.model or d is None:
            out.append(g)
            continue
        model, where = d.get("gpu_model"), "hwloc GPUModel"
        if not model:
            model, where = devices.gpu_model_from_name(d.get("name")), "the PCI device name"
            if model and d.get("name") and re.search(r"\bDevice [0-9a-fA-F]{4}\b", d["name"]):
                where = "the PCI device id"
        if not model and d.get("vendor_id") in (devices.NVIDIA, 0x1002):  # NVIDIA or AMD GPU ids
            model, where = devices.gpu_model_from_id(d.get("device_id")), "the PCI device id"
        if model:
            said.setdefault((model, where), None)
            g = dataclasses.replace(g, model=model)
        out.append(g)
    for model, where in said:
        rep.warnings.append(f"GPU model {model!r} taken from {where} (no nvidia-smi)")
    return out
