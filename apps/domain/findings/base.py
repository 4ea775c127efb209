"""Shared helpers for the diagnosis rules: the rule context and the finding record.

Every rule module (``pcie``, ``nvlink``, ``gdr``, ``fabric``, ``host``) exposes ``RULES``, a list of
functions ``rule(ctx: Ctx) -> list[dict]``. A rule reads the snapshot document (contract in
``apps/domain/analysis.py``) and, for raw details the document does not keep, the parser results
(``ctx.results``: {section kind: plain JSON-like parser result}). A section that is missing, or a
field a parser does not fill, means the rule cannot fire: helpers here return empty values rather
than raising.

A finding is ``{"rule", "severity", "title", "devices", "message", "fix", "source"}``; rule ids,
severities, fixes and sources are those of domain.md section 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apps.domain import names
from apps.domain.names import cell, natural_key, nv_count, pair_key
from apps.domain.names import normalize_token as _normalize_token
from apps.domain.parsers import to_jsonable

SEVERITIES = ("CRIT", "HIGH", "MED", "LOW", "INFO")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}

PCIE_CLASSES = names.PCIE_CLASSES  # topo -m PCIe classes, closest first
GDR_CLASSES = ("PIX", "PXB")  # NCCL's default GDR cutoff on x86 is PXB (rule G01)


@dataclass(frozen=True)
class Rule:
    """Static text of one rule from the domain.md section 1 tables."""

    id: str
    title: str
    severity: str
    fix: str
    source: str


def finding(rule: Rule, devices: Iterable[str], message: str, *, severity: str | None = None,
            fix: str | None = None, title: str | None = None) -> dict:
    """Build one finding dict for ``rule`` (severity/fix/title default to the rule's table text)."""
    sev = severity or rule.severity
    assert sev in SEVERITY_RANK, sev
    return {
        "rule": rule.id,
        "severity": sev,
        "title": title or rule.title,
        "devices": _unique(str(d) for d in devices if d is not None and str(d) != ""),
        "message": message,
        "fix": fix or rule.fix,
        "source": rule.source,
    }


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for it in items:
        seen.setdefault(it, None)
    return list(seen)


def join(names: Iterable[Any], last: str = "and") -> str:
    """``["GPU0", "GPU1", "GPU2"]`` -> ``"GPU0, GPU1 and GPU2"`` (no Python reprs in messages)."""
    items = [str(n) for n in names]
    if not items:
        return ""
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + f" {last} " + items[-1]


def fmt_gbs(value: float | None) -> str:
    """``31.5`` -> ``"31.5 GB/s"``; ``12.0`` -> ``"12 GB/s"``."""
    if value is None:
        return "unknown GB/s"
    v = float(value)
    text = f"{v:.0f}" if abs(v - round(v)) < 0.05 else f"{v:.1f}"
    return f"{text} GB/s"


def fmt_num(value: Any) -> str:
    """Numbers without a trailing ``.0`` (``400.0`` -> ``"400"``, ``2.5`` -> ``"2.5"``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


gpu_sort_key = natural_key  # device names in natural order (apps.domain.names)


def normalize_token(token: Any) -> str:
    """A topo token's modern spelling (:func:`apps.domain.names.normalize_token`); '' when empty."""
    return _normalize_token(token) or ""


def as_int(value: Any) -> int | None:
    try:
        if value is None or isinstance(value, bool):
            return None
        return int(float(str(value).strip().lstrip("xX")))
    except (TypeError, ValueError):
        return None


def as_float(value: Any) -> float | None:
    try:
        if value is None or isinstance(value, bool):
            return None
        return float(str(value).strip().split()[0])
    except (TypeError, ValueError, IndexError):
        return None


def get(obj: Any, *keys: str, default: Any = None) -> Any:
    """First present, non-None value of ``keys`` in mapping ``obj`` (None-safe)."""
    if not isinstance(obj, Mapping):
        return default
    for k in keys:
        v = obj.get(k)
        if v is not None:
            return v
    return default


def as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, (list, tuple)):
        return list(value)
    return []


jsonable = to_jsonable  # parser results as plain JSON values (apps.domain.parsers.to_jsonable)


class Ctx:
    """Read-only view of one host's snapshot document and parser results for the rules."""

    def __init__(self, doc: Mapping[str, Any], results: Mapping[str, Any] | None = None, *, plain: bool = False):
        self.doc = doc or {}
        self.results: dict[str, Any] = {}
        for kind, res in (results or {}).items():
            if plain:  # already to_jsonable output: converting again gives an equal copy
                self.results[kind] = res
                continue
            try:
                self.results[kind] = jsonable(res)
            except Exception:  # an odd result object must not stop the other rules
                continue
        graph = self.doc.get("graph") or {}
        self.nodes: dict[str, dict] = {n.get("id"): n for n in as_list(graph.get("nodes")) if isinstance(n, Mapping)}
        self.edges: list[dict] = [e for e in as_list(graph.get("edges")) if isinstance(e, Mapping)]
        self.gpus: list[dict] = sorted((g for g in as_list(self.doc.get("gpus")) if isinstance(g, Mapping)),
                                       key=lambda g: gpu_sort_key(g.get("name", "")))
        self.nics: list[dict] = [n for n in as_list(self.doc.get("nics")) if isinstance(n, Mapping)]
        self.pairs: dict[tuple[str, str], dict] = {}  # one entry per pair, under names.pair_key
        for p in as_list(self.doc.get("gpu_pairs")):
            if isinstance(p, Mapping) and p.get("a") and p.get("b"):
                self.pairs[pair_key(p["a"], p["b"])] = p
        self.summary: dict = self.doc.get("summary") or {}
        # NCCL environment: the agent's host_info section (nccl_env: {name: value}, from the
        # environment and /etc/nccl.conf), then a separate nccl_env result (wins when both exist)
        self.host: dict = self.results.get("host_info") if isinstance(self.results.get("host_info"), Mapping) else {}
        self.env: dict[str, str] = {**_env(self.host.get("nccl_env")), **_env(self.results.get("nccl_env"))}
        self._cas: dict | None = None
        self._pcie_edges: dict | None = None
        self._memo: dict[str, Any] = {}

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per host: a view several rules read (they must not change it)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    # ---- GPUs and pairs ----------------------------------------------------------------------
    @property
    def gpu_names(self) -> list[str]:
        return [g["name"] for g in self.gpus if g.get("name")]

    def gpu(self, name: str) -> dict:
        for g in self.gpus:
            if g.get("name") == name:
                return g
        return {}

    def pair(self, a: str, b: str) -> dict:
        return self.pairs.get(pair_key(a, b), {})

    def pair_class(self, a: str, b: str) -> str:
        """The topo -m token of a GPU pair (``NV18``, ``PIX`` ... ``SYS``); '' when unknown."""
        cls = normalize_token(self.pair(a, b).get("path_class"))
        if cls:
            return cls
        return normalize_token(self.topo_cell(a, b))

    def topo_cell(self, row: str, col: str) -> str:
        topo = self.results.get("nvidia_smi_topo") or {}
        return normalize_token(cell(topo.get("matrix"), row, col))

    def nv_pairs(self) -> dict[frozenset, int]:
        out = {}
        names = self.gpu_names
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                c = nv_count(self.pair_class(a, b))
                if c:
                    out[frozenset((a, b))] = c
        return out

    def gpu_model(self) -> str | None:
        model = self.summary.get("gpu_model")
        if model:
            return model
        for g in self.gpus:
            if g.get("model"):
                return g["model"]
        for g in as_list((self.results.get("nvidia_smi_gpus") or {}).get("gpus")):
            if isinstance(g, Mapping) and g.get("name"):
                return g["name"]
        return None

    def nvswitch_board(self) -> bool:
        """True on NVSwitch baseboards: the summary says so, or most pairs show the model's NV# norm."""
        if self.summary.get("nvswitch"):
            return True
        if any(n.get("kind") == "nvswitch" for n in self.nodes.values()):
            return True
        names = self.gpu_names
        if len(names) < 4:
            return False
        counts = list(self.nv_pairs().values())
        total = len(names) * (len(names) - 1) // 2
        if not counts:
            return False
        mode = max(set(counts), key=counts.count)
        norm = self.nvswitch_norm()
        if norm is not None:
            return mode == norm and counts.count(mode) * 2 >= total
        return mode >= 12 and counts.count(mode) * 2 >= total

    def nvswitch_norm(self) -> int | None:
        try:
            from apps.domain.bandwidth import gpu_generation
        except ImportError:  # pragma: no cover - the bandwidth table is part of the engine
            return None
        return gpu_generation(self.gpu_model()).nvswitch_norm

    # ---- NICs ----------------------------------------------------------------------------------
    def nic_active(self, nic: Mapping) -> bool:
        if nic.get("active") is not None:
            return bool(nic["active"])
        return str(nic.get("state") or "").lower() == "active"

    def is_compute(self, nic: Mapping) -> bool:
        """A compute NIC; without GPUs in the document the classification is meaningless: all are."""
        return bool(nic.get("compute", True)) or not self.gpus

    def nic_usable(self, nic: Mapping) -> bool:
        """Active, or its state was not reported (the document's ``network.usable``: a port NCCL may
        use; a partial ibstatus with rate and link layer only must not demote a 400G port)."""
        if nic.get("active") is not None:
            return bool(nic["active"])
        return not nic.get("state") or str(nic.get("state")).lower() == "active"

    def compute_nics(self, active_only: bool = True) -> list[dict]:
        """Compute NIC ports; ``active_only``: those NCCL may use (Active, or state not reported)."""
        out = [n for n in self.nics if self.is_compute(n)]
        return [n for n in out if self.nic_usable(n)] if active_only else out

    def nic(self, name: str) -> dict:
        for n in self.nics:
            if n.get("name") == name or n.get("label") == name:
                return n
        return {}

    def rail_design(self) -> bool:
        """One compute NIC per GPU (or more): every GPU is meant to use its own NIC."""
        g = len(self.gpus)
        return g > 1 and len(self.compute_nics()) >= g

    def ib_port(self, ca: str, port: Any = None) -> dict:
        """Raw port record for HCA ``ca`` from ibstat/ibstatus/ibv_devinfo/sysfs_ib, merged."""
        merged: dict = {}
        if self._cas is None:  # {(kind, CA name): [CA records]}, built once
            self._cas = {}
            for kind in _IB_KINDS:
                for c in as_list((self.results.get(kind) or {}).get("cas")):
                    if isinstance(c, Mapping):
                        self._cas.setdefault((kind, c.get("name")), []).append(c)
        for kind in _IB_KINDS:
            for c in self._cas.get((kind, ca), ()):
                ports = [p for p in as_list(c.get("ports")) if isinstance(p, Mapping)]
                for p in ports:
                    if port is None or as_int(p.get("number")) == as_int(port) or len(ports) == 1:
                        for k, v in p.items():
                            if v is not None and merged.get(k) is None:
                                merged[k] = v
                        merged.setdefault("ca_type", c.get("ca_type"))
                        break
        return merged

    # ---- graph ---------------------------------------------------------------------------------
    def node_name(self, node_id: str) -> str:
        n = self.nodes.get(node_id) or {}
        if n.get("kind") in ("gpu", "nic"):
            return n.get("label") or node_id
        return n.get("label") or n.get("bdf") or node_id

    def uplink(self, node_id: str) -> dict | None:
        """The PCIe edge from ``node_id`` to its parent (the child's upstream link)."""
        node = self.nodes.get(node_id) or {}
        parent = node.get("parent")
        best = None
        if self._pcie_edges is None:  # {node id: [pcie edges touching it]} in edge order, built once
            self._pcie_edges = {}
            for e in self.edges:
                if e.get("kind") == "pcie":
                    ends = (e.get("source"), e.get("target"))
                    for end in dict.fromkeys(ends):
                        self._pcie_edges.setdefault(end, []).append(e)
        for e in self._pcie_edges.get(node_id, ()):
            ends = (e.get("source"), e.get("target"))
            other = ends[1] if ends[0] == node_id else ends[0]
            if parent is not None and other == parent:
                return e
            if best is None and ends[0] == node_id:
                best = e
        return best if parent is None else None

    def node_for_bdf(self, bdf: str) -> str | None:
        if not bdf:
            return None
        for nid, n in self.nodes.items():
            if n.get("bdf") == bdf:
                return nid
            attrs = n.get("attrs") or {}
            if bdf == attrs.get("upstream_bdf") or bdf in as_list(attrs.get("port_bdfs")):
                return nid
        return None

    def descendants(self, node_id: str) -> list[str]:
        """Node ids whose parent chain reaches ``node_id``."""
        out = []
        for nid in self.nodes:
            seen = set()
            cur = (self.nodes.get(nid) or {}).get("parent")
            while cur is not None and cur not in seen:
                if cur == node_id:
                    out.append(nid)
                    break
                seen.add(cur)
                cur = (self.nodes.get(cur) or {}).get("parent")
        return out

    def pci_devices(self, kind: str) -> list[dict]:
        """The device records of a PCI source (``lspci_verbose``, ``lspci_tree``, ``sysfs_pci``), in
        its order; listed once per host (a whole-machine lspci has 500 functions): not to be changed."""
        key = "pci_devices:" + kind
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = [d for d in as_list((self.results.get(kind) or {}).get("devices"))
                                       if isinstance(d, Mapping)]
        return found

    def pci_records(self, kind: str, bdf: str | None) -> list[dict]:
        """The records of ``pci_devices(kind)`` whose ``bdf`` is ``bdf``, in the source's order
        (one, unless the source repeats an address)."""
        key = "pci_by_bdf:" + kind
        index = self._memo.get(key)
        if index is None:
            index = self._memo[key] = {}
            for d in self.pci_devices(kind):
                index.setdefault(d.get("bdf"), []).append(d)
        return index.get(bdf, [])

    def warnings(self) -> list[str]:
        out = [w for w in as_list(self.doc.get("warnings")) if isinstance(w, str)]
        graph = self.doc.get("graph") or {}
        out += [w for w in as_list(graph.get("warnings")) if isinstance(w, str) and w not in out]
        return out


_IB_KINDS = ("sysfs_ib", "ibv_devinfo", "ibstatus", "ibstat")


def _env(raw: Any) -> dict[str, str]:
    """NCCL environment from an ``nccl_env`` result of any reasonable shape: {name: value},
    {"vars"|"env"|"variables": {...}} or a list of {"name", "value"}."""
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        for key in ("vars", "env", "variables", "settings"):
            if key in raw:
                return _env(raw[key])
        return {str(k): str(v) for k, v in raw.items() if str(k).startswith("NCCL_") and v is not None}
    if isinstance(raw, (list, tuple)):
        out = {}
        for item in raw:
            if isinstance(item, Mapping) and item.get("name"):
                out[str(item["name"])] = str(item.get("value", ""))
        return out
    return {}


def parse_ib_hca(value: str) -> tuple[str, list[tuple[str, int | None]]]:
    """Split ``NCCL_IB_HCA`` into (mode, [(name, port)]): mode is ``"="`` (exact), ``"^"`` (exclude,
    prefix match), ``"^="`` (exclude exact) or ``""`` (prefix match), as NCCL's env doc says."""
    v = (value or "").strip()
    mode = ""
    if v.startswith("^"):
        mode, v = "^", v[1:]
    if v.startswith("="):
        mode, v = mode + "=", v[1:]
    entries = []
    for tok in v.split(","):
        tok = tok.strip()
        if not tok:
            continue
        name, _, port = tok.partition(":")
        entries.append((name, as_int(port) if port else None))
    return mode, entries


def hca_selected(name: str, port: Any, mode: str, entries: list[tuple[str, int | None]]) -> bool:
    """Whether NCCL's ``NCCL_IB_HCA`` filter keeps HCA ``name`` port ``port``."""
    exact = "=" in mode
    hit = False
    for ent, ent_port in entries:
        ok = name == ent if exact else name.startswith(ent)
        if ok and (ent_port is None or as_int(port) in (None, ent_port)):
            hit = True
            break
    return not hit if mode.startswith("^") else hit


# ---- GPUs of per-GPU sections the document does not carry (nvidia-smi -q, nvlink -e) -----------


def gpu_label(ctx: Ctx, bdf: str | None, index: Any = None) -> str:
    """The document's name of the GPU at PCI address ``bdf`` (``GPU3``), else ``GPU<index>``, else
    the address: the name a finding uses for a GPU that a per-GPU section reports."""
    if bdf:
        for g in ctx.gpus:
            if g.get("bdf") == bdf and g.get("name"):
                return str(g["name"])
    i = as_int(index)
    if i is not None:
        return f"GPU{i}"
    return str(bdf or "GPU?")


def section_gpus(ctx: Ctx, kind: str) -> list[tuple[str, dict]]:
    """``(label, record)`` for each GPU record of section ``kind`` (``nvidia_smi_q``...), in printed order."""
    return [(gpu_label(ctx, g.get("bdf"), g.get("index")), g)
            for g in as_list((ctx.results.get(kind) or {}).get("gpus")) if isinstance(g, Mapping)]
