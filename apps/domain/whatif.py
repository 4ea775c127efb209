"""What-if layouts: a host with edits applied, analysed again beside the original.

``whatif(base, edits)`` takes a host -- a node report (section kind -> raw text), a
:class:`~apps.domain.analysis.HostAnalysis`, a snapshot document or a HostGraph -- and a list of
edits, applies the edits to a copy of the host graph (and to the parser results the findings
read), and runs the whole analysis again: paths, GPU -> NIC choices, GPUDirect RDMA, contention,
findings, estimate, NCCL settings. It returns::

    {"before": <snapshot document>, "after": <snapshot document>,
     "changes": <apps.domain.compare.compare_docs(before, after)> + "settings": ["NAME: old -> new"]}

``changes["summary"]`` starts with the settings changed and ends with the estimate's sentence
when the estimate moved (compare's own sentences in between).

Edits (a JSON list; the same in the UI, the API and the CLI), applied in order, each seeing the
host as the edits before it left it:

* ``{"op": "add_nic", "name": "mlx5_4", "near": "GPU4", "rate_gbit": 200, "link_layer": "InfiniBand"}``
  an Active port on the GPU's PCIe switch (the same parent bridge as the GPU, NUMA node of the
  GPU), its PCIe link the GPU's own (a NIC beside the GPU on that switch); ``link_layer``
  defaults to InfiniBand;
* ``{"op": "move_nic", "name": "mlx5_2", "near": "GPU5"}``: the NIC port keeps its PCIe link and
  goes under GPU5's parent bridge;
* ``{"op": "remove", "name": "mlx5_3"}``: a NIC port or a GPU leaves the host;
* ``{"op": "set_nic", "name": "mlx5_0", "rate_gbit": 400, "state": "Active", "link_layer": "Ethernet"}``
  (any of the three); a port set Down is ``Polling`` physically, as an unplugged cable is;
* ``{"op": "set_gpu_model", "model": "NVIDIA H100 80GB HBM3"}``: every GPU; the NVLink figures and
  the assumed PCIe links follow the model (``apps.domain.bandwidth``);
* ``{"op": "set_link", "device": "GPU3", "gen": 5, "width": 16}``: the device's upstream PCIe link
  (a GPU, a NIC port, a switch or a root port by graph id) now trains at that generation and
  width, its capability at least as much;
* ``{"op": "set_env", "name": "NCCL_NVLS_ENABLE", "value": "0"}``: an NCCL setting the engine
  honours (``HONOURED_ENV``); ``"value": null`` unsets it.

A bad edit raises :class:`WhatIfError` naming the edit's index (0-based), its op and the field.
Plain Python: no Django.

>>> topo = "\\tGPU0\\tGPU1\\nGPU0\\t X \\tPIX\\nGPU1\\tPIX\\t X \\n"
>>> r = whatif({"nvidia_smi_topo": topo}, [{"op": "add_nic", "name": "mlx5_0", "near": "GPU0", "rate_gbit": 400}])
>>> [n["name"] for n in r["before"]["nics"]], [n["name"] for n in r["after"]["nics"]]
([], ['mlx5_0'])
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx

from apps.domain import bandwidth as bw
from apps.domain.assumptions import assume
from apps.domain.analysis import HostAnalysis, analyze_host, build_document, nccl_env
from apps.domain.assemble import assemble
from apps.domain.compare import compare_docs
from apps.domain.hostgraph.draft import add_node, add_pcie_edge
from apps.domain.names import natural_sorted
from apps.domain.nccl_system import document_graph
from apps.domain.shellsafe import SAFE_NAME

__all__ = ["OPS", "HONOURED_ENV", "WhatIfError", "validate_edits", "apply_edits", "whatif", "edits_hash", "host_of"]

# The NCCL settings the engine reads (estimate.py, nccl_tuning.py, nccl_system.py and the
# findings gdr.py, host.py, fabric.py): tests/domain/test_whatif.py keeps this list in step.
HONOURED_ENV = frozenset({
    "NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE", "NCCL_CROSS_NIC", "NCCL_IB_HCA",
    "NCCL_NET_MERGE_LEVEL", "NCCL_PXN_DISABLE", "NCCL_NET_GDR_LEVEL", "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL",
    "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX", "NCCL_IB_ADDR_FAMILY",
    "NCCL_IB_ROCE_VERSION_NUM",
})

# op -> (required fields, optional fields)
OPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "add_nic": (("name", "near", "rate_gbit"), ("link_layer",)),
    "move_nic": (("name", "near"), ()),
    "remove": (("name",), ()),
    "set_nic": (("name",), ("rate_gbit", "state", "link_layer")),
    "set_gpu_model": (("model",), ()),
    "set_link": (("device", "gen", "width"), ()),
    "set_env": (("name", "value"), ()),
}
MAX_EDITS = 200
_STATES = {"active": "Active", "down": "Down", "init": "Init", "armed": "Armed"}
_LAYERS = {"infiniband": "InfiniBand", "ethernet": "Ethernet"}
_WIDTHS = (1, 2, 4, 8, 16, 32)
_IB_KINDS = ("ibstat", "ibstatus", "ibv_devinfo", "sysfs_ib")


class WhatIfError(ValueError):
    """An edit that cannot be applied: ``index`` (0-based position in the list, None for the list
    itself), ``op``, ``field`` and a plain ``reason``."""

    def __init__(self, index: int | None, op: str | None, field: str | None, reason: str) -> None:
        self.index, self.op, self.field, self.reason = index, op, field, reason
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = "edits" if self.index is None else f"edit {self.index}" + (f" ({self.op})" if self.op else "")
        return f"{where}: " + (f"field {self.field!r}: " if self.field else "") + self.reason

    def as_dict(self) -> dict:
        return {"index": self.index, "op": self.op, "field": self.field, "reason": self.reason}


# -- validation ---------------------------------------------------------------------------------

def validate_edits(edits: Any) -> list[dict]:
    """The edit list with each field checked and normalised (states and link layers in ibstat's
    spelling, numbers as numbers, env values as strings); raises WhatIfError on the first bad edit.

    >>> validate_edits([{"op": "set_nic", "name": "mlx5_0", "state": "active"}])
    [{'op': 'set_nic', 'name': 'mlx5_0', 'state': 'Active'}]
    """
    if not isinstance(edits, list):
        raise WhatIfError(None, None, None, f"must be a JSON list of edits, got {type(edits).__name__}")
    if len(edits) > MAX_EDITS:
        raise WhatIfError(None, None, None, f"at most {MAX_EDITS} edits, got {len(edits)}")
    return [_validate(i, e) for i, e in enumerate(edits)]


def _validate(i: int, edit: Any) -> dict:
    if not isinstance(edit, Mapping):
        raise WhatIfError(i, None, None, f"must be an object with an \"op\", got {type(edit).__name__}")
    op = edit.get("op")
    if op not in OPS:
        raise WhatIfError(i, None, "op", f"unknown op {op!r}; known: {', '.join(OPS)}")
    required, optional = OPS[op]
    extra = [k for k in edit if k != "op" and k not in required + optional]
    if extra:
        raise WhatIfError(i, op, extra[0], f"unknown field; {op} takes {', '.join(required + optional)}")
    missing = [k for k in required if k not in edit]
    if missing:
        raise WhatIfError(i, op, missing[0], "missing")
    if op == "set_nic" and not any(k in edit for k in optional):
        raise WhatIfError(i, op, None, "give at least one of rate_gbit, state, link_layer")
    out: dict[str, Any] = {"op": op}
    for key in required + optional:
        if key in edit:
            out[key] = _field(i, op, key, edit[key])
    return out


def _field(i: int, op: str, key: str, value: Any) -> Any:
    def bad(reason: str) -> WhatIfError:
        return WhatIfError(i, op, key, reason)

    if key == "value":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise bad(f"must be a string (or null to unset), got {type(value).__name__}")
        return str(value)
    if key in ("rate_gbit", "gen", "width"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise bad(f"must be a number, got {value!r}")
        if key == "rate_gbit":
            if not 0 < value <= 3200:
                raise bad(f"must be between 0 and 3200 Gb/s, got {value}")
            return int(value) if float(value).is_integer() else float(value)
        if key == "gen" and (value != int(value) or not 1 <= value <= 6):
            raise bad(f"must be a PCIe generation 1-6, got {value}")
        if key == "width" and value not in _WIDTHS:
            raise bad(f"must be a PCIe width {', '.join(map(str, _WIDTHS))}, got {value}")
        return int(value)
    if not isinstance(value, str) or not value.strip():
        raise bad(f"must be a non-empty string, got {value!r}")
    value = value.strip()
    if key == "state":
        if value.lower() not in _STATES:
            raise bad(f"must be one of {', '.join(_STATES.values())}, got {value!r}")
        return _STATES[value.lower()]
    if key == "link_layer":
        if value.lower() not in _LAYERS:
            raise bad(f"must be InfiniBand or Ethernet, got {value!r}")
        return _LAYERS[value.lower()]
    if key == "name" and op == "set_env":
        if value not in HONOURED_ENV:
            raise bad(f"{value!r} is not an NCCL setting the engine honours; honoured: {', '.join(sorted(HONOURED_ENV))}")
        return value
    if key in ("name", "near", "device") and not SAFE_NAME.match(value):
        raise bad(f"{value!r} holds characters outside [A-Za-z0-9_.:/-]")
    if key == "model" and bw.gpu_generation(value).family is None:
        raise bad(f"unknown GPU model {value!r} (give it as nvidia-smi prints it, e.g. \"NVIDIA H100 80GB HBM3\")")
    return value


def edits_hash(edits: Sequence[Mapping]) -> str:
    """A digest of a (validated) edit list: the cache key of a plan's evaluation."""
    return hashlib.sha256(json.dumps(list(edits), sort_keys=True).encode()).hexdigest()[:32]


# -- applying -----------------------------------------------------------------------------------

def apply_edits(G: nx.Graph, results: Mapping[str, Any], edits: Any) -> tuple[nx.Graph, dict]:
    """(a new HostGraph, new parser results) with ``edits`` applied; neither input is changed.

    ``results`` are the plain (``to_jsonable``) parser results the findings read: their port
    records follow set_nic and remove, and set_env writes an ``nccl_env`` result (which wins
    over the host_info settings, as in a report)."""
    checked = validate_edits(edits)
    H = G.copy()
    H.graph = dict(G.graph)
    for key in ("warnings", "assumptions", "unplaced"):
        H.graph[key] = list(G.graph.get(key) or [])
    res = dict(results)
    for kind in _IB_KINDS:
        if kind in res:
            res[kind] = copy.deepcopy(res[kind])
    env = nccl_env(res)
    env_edited = False
    for i, e in enumerate(checked):
        op = e["op"]
        if op == "set_env":
            if e["value"] is None:
                env.pop(e["name"], None)
            else:
                env[e["name"]] = e["value"]
            env_edited = True
        else:
            _APPLY[op](H, res, i, e)
    if env_edited:
        res["nccl_env"] = dict(env)
    return H, res


def _nic(H: nx.Graph, i: int, op: str, name: str) -> str:
    if name in H and H.nodes[name].get("kind") == "nic":
        return name
    by_label = [n for n, d in H.nodes(data=True) if d.get("kind") == "nic" and d.get("nic_label") == name]
    if len(by_label) == 1:
        return by_label[0]
    raise WhatIfError(i, op, "name", f"no NIC {name!r} on this host; NICs: {', '.join(_names(H, 'nic')) or 'none'}")


def _near(H: nx.Graph, i: int, op: str, gpu: str) -> str:
    """The PCIe switch above ``gpu`` (where a NIC beside it goes); a GPU right under a root port or
    a host bridge gets one (``switch:planned:<gpu>``, on the GPU's link), as a riser would add."""
    if gpu not in H or H.nodes[gpu].get("kind") != "gpu":
        raise WhatIfError(i, op, "near", f"no GPU {gpu!r} on this host; GPUs: {', '.join(_names(H, 'gpu')) or 'none'}")
    g = H.nodes[gpu]
    parent = g.get("parent")
    if parent is None or parent not in H:
        raise WhatIfError(i, op, "near", f"{gpu}'s place in the PCIe tree is unknown: no bridge to put a NIC beside it")
    if H.nodes[parent].get("kind") == "switch":
        return parent
    switch = f"switch:planned:{gpu}"
    link = _uplink(H, gpu)
    add_node(H, switch, "switch", f"PCIe switch (planned, above {gpu})", numa=g.get("numa"), parent=parent,
             inferred=bool(g.get("inferred")), planned="added")
    if link is not None:
        H.remove_edge(gpu, parent)
    _carry(H, switch, parent, link, f"planned: a PCIe switch above {gpu}, on {gpu}'s link")
    g["parent"] = switch
    _carry(H, gpu, switch, link, None)
    return switch


def _names(H: nx.Graph, kind: str) -> list[str]:
    return natural_sorted(n for n, d in H.nodes(data=True) if d.get("kind") == kind)


def _uplink(H: nx.Graph, node: str) -> dict | None:
    parent = H.nodes[node].get("parent")
    if parent is not None and H.has_edge(node, parent) and H.edges[node, parent].get("kind") == "pcie":
        return H.edges[node, parent]
    return None


def _carry(H: nx.Graph, child: str, parent: str, link: Mapping | None, note: str | None) -> None:
    """``child``'s PCIe edge to ``parent`` with the figures of ``link`` (an existing edge, moved or
    copied: the same link); without one, the Gen4 x16 link assumed where nobody reported one."""
    if link is not None:
        H.add_edge(child, parent, **{**dict(link), "note": note if note is not None else link.get("note")})
        return
    add_pcie_edge(H, child, parent, gen=None, width=None, max_gen=None, max_width=None,
                  is_gpu=H.nodes[child].get("kind") == "gpu", note=note,
                  assume=(4, 16, "PCIe link not reported: Gen4 x16 assumed"))


def _relink(H: nx.Graph, child: str, parent: str, link: Mapping, *, gen: int, width: int, note: str) -> None:
    """``child``'s PCIe edge to ``parent`` trained at ``gen`` x ``width`` (capability at least as
    much), its figures recomputed by ``add_pcie_edge`` (``apps.domain.bandwidth``)."""
    add_pcie_edge(H, child, parent, gen=gen, width=width, max_gen=max(link.get("max_gen") or 0, gen),
                  max_width=max(link.get("max_width") or 0, width), is_gpu=H.nodes[child].get("kind") == "gpu",
                  inferred=bool(link.get("inferred")), note=note)


def _add_nic(H: nx.Graph, res: dict, i: int, e: dict) -> None:
    name = e["name"]
    if name in H:
        raise WhatIfError(i, "add_nic", "name", f"{name!r} is already taken on this host")
    parent = _near(H, i, "add_nic", e["near"])
    gpu = H.nodes[e["near"]]
    link = _uplink(H, e["near"])
    explicit = any(d.get("compute") is not None for _, d in H.nodes(data=True) if d.get("kind") == "nic")
    add_node(H, name, "nic", name, bdf=None, numa=gpu.get("numa"), parent=parent, inferred=bool(gpu.get("inferred")),
             port=1, state="Active", phys_state="LinkUp", rate_gbps=e["rate_gbit"],
             link_layer=e.get("link_layer", "InfiniBand"), active=True, device=name, nic_label=None, netdevs=[],
             gdr=None, transport="verbs", width=None, speed=None, firmware=None, port_guid=None, node_guid=None,
             planned="added", **({"compute": True} if explicit else {}))
    _carry(H, name, parent, link, f"planned: added beside {e['near']}, on a link like {e['near']}'s")


def _move_nic(H: nx.Graph, res: dict, i: int, e: dict) -> None:
    nic = _nic(H, i, "move_nic", e["name"])
    parent = _near(H, i, "move_nic", e["near"])
    old_parent = H.nodes[nic].get("parent")
    link = _uplink(H, nic)
    if old_parent is not None and H.has_edge(nic, old_parent):
        H.remove_edge(nic, old_parent)
    d = H.nodes[nic]
    d.update(parent=parent, numa=H.nodes[e["near"]].get("numa"), planned="moved")
    d.pop("placement", None)
    if nic in H.graph["unplaced"]:
        H.graph["unplaced"].remove(nic)
    _carry(H, nic, parent, link, f"planned: moved beside {e['near']}")


def _remove(H: nx.Graph, res: dict, i: int, e: dict) -> None:
    name = e["name"]
    kind = H.nodes[name].get("kind") if name in H else None
    if kind == "gpu":
        H.remove_node(name)
        return
    nic = _nic(H, i, "remove", name)
    ca, port = _ca_port(H, nic)
    H.remove_node(nic)
    for kind in _IB_KINDS:
        for c in (res.get(kind) or {}).get("cas") or []:
            if c.get("name") == ca:
                c["ports"] = [p for p in c.get("ports") or [] if port is not None and p.get("number") != port]


def _set_nic(H: nx.Graph, res: dict, i: int, e: dict) -> None:
    nic = _nic(H, i, "set_nic", e["name"])
    d = H.nodes[nic]
    patch: dict[str, Any] = {}
    if "rate_gbit" in e:
        patch.update(rate_gbps=e["rate_gbit"], speed=None)
    if "state" in e:
        patch.update(state=e["state"], active=e["state"] == "Active",
                     phys_state="LinkUp" if e["state"] in ("Active", "Armed", "Init") else "Polling")
    if "link_layer" in e:
        patch["link_layer"] = e["link_layer"]
    d.update(patch, planned="changed")
    ca, port = _ca_port(H, nic)
    record = {k: v for k, v in patch.items() if k in ("rate_gbps", "state", "phys_state", "link_layer")}
    for kind in _IB_KINDS:
        for c in (res.get(kind) or {}).get("cas") or []:
            if c.get("name") != ca:
                continue
            ports = c.get("ports") or []
            for p in ports:
                if port is None or p.get("number") == port or len(ports) == 1:
                    p.update(record)
                    p.update({k: None for k in ("rate_raw", "state_raw", "phys_state_raw", "speed_name",
                                                "active_speed", "active_width") if k in p})


def _ca_port(H: nx.Graph, nic: str) -> tuple[str, int | None]:
    d = H.nodes[nic]
    ca = d.get("device") or nic.split(":")[0]
    return str(ca), d.get("port")


def _set_gpu_model(H: nx.Graph, res: dict, i: int, e: dict) -> None:
    model = e["model"]
    gpus = [n for n, d in H.nodes(data=True) if d.get("kind") == "gpu"]
    if not gpus:
        raise WhatIfError(i, "set_gpu_model", "model", "this host has no GPU")
    for g in gpus:
        H.nodes[g]["model"] = model
    was_assumed = bool(H.graph.get("gpu_model_assumed") or H.graph.get("assumed_gpu_model"))
    H.graph.update(gpu_model=model, gpu_model_assumed=None, assumed_gpu_model=None)
    H.graph["assumptions"] = [a for a in H.graph["assumptions"] if not str(a).startswith("GPU model unknown")]
    for a, b, d in H.edges(data=True):
        if d.get("kind") == "nvlink" and d.get("fabric") != "xgmi" and d.get("links"):
            link = bw.nvlink(model, d["links"])
            d.update(spec_gbs=link.spec_gbs, expected_gbs=link.expected_gbs, nccl_gbs=link.nccl_gbs,
                     source=link.source)
    if not was_assumed:
        return
    # PCIe links nobody reported were assumed from the GPU class: assume again from the model
    policy = assume(model, gpu_count=len(gpus), cpu_vendor=H.graph.get("cpu_vendor"),
                       cpu_model=H.graph.get("cpu_model"))
    for child, d in list(H.nodes(data=True)):
        link = _uplink(H, child)
        if link is not None and link.get("assumed"):
            parent = d["parent"]
            old = dict(link)
            H.remove_edge(child, parent)
            add_pcie_edge(H, child, parent, gen=old.get("gen"), width=old.get("width"), max_gen=old.get("max_gen"),
                          max_width=old.get("max_width"), is_gpu=d.get("kind") == "gpu",
                          inferred=bool(old.get("inferred")),
                          assume=(policy.pcie_gen, policy.pcie_width, policy.pcie_note))


def _set_link(H: nx.Graph, res: dict, i: int, e: dict) -> None:
    dev = e["device"]
    if dev not in H:
        raise WhatIfError(i, "set_link", "device", f"no device {dev!r} on this host")
    parent = H.nodes[dev].get("parent")
    link = _uplink(H, dev)
    if link is None:
        raise WhatIfError(i, "set_link", "device", f"{dev} has no PCIe link to a parent bridge")
    old = dict(link)
    H.remove_edge(dev, parent)
    _relink(H, dev, parent, old, gen=e["gen"], width=e["width"], note=f"planned: Gen{e['gen']} x{e['width']}")
    H.nodes[dev]["planned"] = "changed"


_APPLY = {"add_nic": _add_nic, "move_nic": _move_nic, "remove": _remove, "set_nic": _set_nic,
          "set_gpu_model": _set_gpu_model, "set_link": _set_link}


# -- the whole what-if --------------------------------------------------------------------------

def host_of(base: Any, hostname: str | None = None) -> tuple[nx.Graph, dict, dict | None]:
    """(HostGraph, plain parser results, its document when already built) of a host given as a
    node report (section kind -> raw text), a HostAnalysis, a snapshot document or a HostGraph."""
    if isinstance(base, nx.Graph):
        return base, {}, None
    if isinstance(base, HostAnalysis):
        if base.graph is not None:
            return _with_p2p(base.graph, base.results), dict(base.results), base.to_dict()
        return (*_document_host(base.doc), None)
    if isinstance(base, Mapping) and "schema" in base and "graph" in base:
        return (*_document_host(base), None)
    if isinstance(base, Mapping):
        analysis = analyze_host(base, hostname)
        return _with_p2p(analysis.graph, analysis.results), dict(analysis.results), analysis.to_dict()
    raise TypeError(f"a what-if needs a report, an analysis, a document or a graph, not {type(base).__name__}")


def _with_p2p(G: nx.Graph, results: Mapping) -> nx.Graph:
    """``G`` with the topo -p2p matrices in ``G.graph["p2p"]`` (what ``analyze_host`` hands the
    document builder from the facts; ``paths`` reads them from there when not given)."""
    if not results.get("nvidia_smi_p2p") or G.graph.get("p2p"):
        return G
    H = G.copy()
    H.graph["p2p"] = assemble({"nvidia_smi_p2p": results["nvidia_smi_p2p"]}, G.graph.get("hostname") or "h").p2p
    return H


def _document_host(doc: Mapping) -> tuple[nx.Graph, dict]:
    """A stored document's graph, with the graph facts ``document_graph`` leaves out, and its
    NCCL settings as the one parser result (the raw report's other results are not in it)."""
    G = document_graph(doc)
    g = doc.get("graph") or {}
    summary = doc.get("summary") or {}
    G.graph.update(nvlink_reported=g.get("nvlink_reported"), cpu_name=g.get("cpu_name"),
                   nic_inventory=list(g.get("nic_inventory") or []), nic_unknown=g.get("nic_unknown"),
                   socket_nets=list(g.get("socket_nets") or []), virtual_pci=bool(g.get("virtual_pci")),
                   unplaced=list(g.get("unplaced") or []), numa_nodes=summary.get("numa_nodes"),
                   socket_count=summary.get("socket_count"))
    return G, ({"nccl_env": dict(doc["nccl_env"])} if doc.get("nccl_env") else {})


def whatif(base: Any, edits: Any, *, hostname: str | None = None) -> dict:
    """The host before and after ``edits``, and what changed (see the module docstring).

    ``before`` is the analysis of the host as given (for a stored document: rebuilt from its
    graph, so that ``changes`` holds only what the edits did); ``after`` carries
    ``"plan": True``. Raises WhatIfError for a bad edit (checked before the host is read),
    ParseError / UnknownKindError for a report that cannot be read."""
    checked = validate_edits(edits)
    G, results, before = host_of(base, hostname)
    if before is None:
        before = build_document(G, results=results, _plain_results=True)
    H, res = apply_edits(G, results, checked)
    after = build_document(H, results=res, _plain_results=True)
    after["plan"] = True
    return {"before": before, "after": after, "changes": _changes(before, after)}


def _changes(before: dict, after: dict) -> dict:
    """``compare_docs`` with what it does not say about a what-if: each NCCL setting changed
    (first) and the estimate's sentence when the estimate moved."""
    changes = compare_docs(before, after)
    env_a, env_b = before.get("nccl_env") or {}, after.get("nccl_env") or {}
    settings = [f"{k}: {env_a.get(k, 'unset')} -> {env_b.get(k, 'unset')}"
                for k in sorted(set(env_a) | set(env_b)) if env_a.get(k) != env_b.get(k)]
    bandwidth = changes.get("bandwidth") or {}
    extra = [bandwidth["text"][0].upper() + bandwidth["text"][1:]] if bandwidth.get("changed") and bandwidth.get(
        "text") else []
    changes["summary"] = settings + list(changes["summary"]) + extra
    changes["settings"] = settings
    changes["changed"] = bool(changes["changed"] or settings or extra)
    return changes
