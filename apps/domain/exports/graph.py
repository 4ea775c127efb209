"""A snapshot's host graph as networkx node-link JSON and as GraphML.

Both start from the HostGraph the document describes (``HostAnalysis.from_dict(doc).host_graph()``,
contract in :mod:`apps.domain.hostgraph`): nodes ``GPU0``, ``mlx5_0``, ``pci:<bdf>`` ... with
``kind``, ``label``, ``bdf``, ``numa``, ``parent``, ``inferred`` and their own attributes (GPU
``model``, NIC ``state``/``rate_gbps``, switch ``upstream_bdf``); edges with ``kind``, ``gen``,
``width``, ``max_gen``, ``max_width``, ``links``, ``spec_gbs``/``expected_gbs``/``nccl_gbs`` (GB/s
per direction), ``degraded``, ``inferred``, ``assumed``, ``note`` and ``citation`` (the bandwidth's
source: the HostGraph's edge attribute ``source``, renamed as in the snapshot document because
node-link JSON uses ``source``/``target`` for an edge's ends). Graph attributes: ``hostname``,
``mode``, ``sources``, ``cpu_vendor``, ``warnings`` ...

* :func:`graph_json`: ``networkx.node_link_data`` (``{"directed", "multigraph", "graph",
  "nodes": [{"id", ...}], "edges": [{"source", "target", ...}]}``), nodes and edges in natural id
  order and keys sorted, so the same document always gives the same text; JSON-clean (NaN and
  infinities as null, tuples and sets as lists). ``networkx.node_link_graph(json.loads(text),
  edges="edges")`` gives the graph back.
* :func:`graphml`: networkx's GraphML writer. GraphML holds scalars only, so every attribute is
  flattened to one GraphML type per name: all booleans ``boolean``, all integers ``int``, all
  numbers ``double``, anything else ``string`` (lists and mappings as JSON text); a null value
  is left off its element (GraphML has no null), and characters XML cannot carry are escaped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import networkx as nx

from apps.domain.exports._common import checked_doc, natural_key, xml_text

__all__ = ["graph_json", "graphml", "export_graph"]


def export_graph(doc: Mapping[str, Any]) -> nx.Graph:
    """The document's host graph, nodes and edges in natural id order, the edge citation as
    ``citation``; raises ExportError when ``doc`` is not a snapshot document."""
    from apps.domain.analysis import HostAnalysis

    G = HostAnalysis.from_dict(checked_doc(doc)).host_graph()
    out = nx.Graph(**G.graph)
    for n in sorted(G, key=natural_key):
        out.add_node(n, **G.nodes[n])
    edges = sorted(G.edges(data=True), key=lambda e: (natural_key(e[0]), natural_key(e[1])))
    for u, v, d in edges:
        out.add_edge(u, v, **{("citation" if k == "source" else k): val for k, val in d.items()})
    return out


def graph_json(doc: Mapping[str, Any]) -> str:
    """The host graph of ``doc`` as node-link JSON text (see the module docstring).

    >>> from apps.domain.analysis import analyze_host
    >>> topo = "\\tGPU0\\tGPU1\\nGPU0\\t X \\tPIX\\nGPU1\\tPIX\\t X \\n"
    >>> text = graph_json(analyze_host({"nvidia_smi_topo": topo}, "n1").doc)
    >>> data = json.loads(text)
    >>> sorted(n["id"] for n in data["nodes"] if n["kind"] == "gpu"), data["graph"]["hostname"]
    (['GPU0', 'GPU1'], 'n1')
    """
    data = nx.node_link_data(export_graph(doc), edges="edges")
    return json.dumps(_json_clean(data), indent=2, sort_keys=True, allow_nan=False)


def graphml(doc: Mapping[str, Any]) -> str:
    """The host graph of ``doc`` as GraphML text, attributes flattened to GraphML's types.

    >>> from apps.domain.analysis import analyze_host
    >>> import io
    >>> topo = "\\tGPU0\\tGPU1\\nGPU0\\t X \\tPIX\\nGPU1\\tPIX\\t X \\n"
    >>> text = graphml(analyze_host({"nvidia_smi_topo": topo}, "n1").doc)
    >>> G = nx.read_graphml(io.BytesIO(text.encode()))
    >>> G.nodes["GPU0"]["kind"], G.graph["hostname"]
    ('gpu', 'n1')
    """
    G = export_graph(doc)
    flat = nx.Graph()
    flat.graph.update(_flatten_scope([G.graph])[0])
    node_attrs = _flatten_scope([G.nodes[n] for n in G])
    for n, attrs in zip(G, node_attrs):
        flat.add_node(xml_text(n), **attrs)
    edge_attrs = _flatten_scope([d for _u, _v, d in G.edges(data=True)])
    for (u, v, _d), attrs in zip(G.edges(data=True), edge_attrs):
        flat.add_edge(xml_text(u), xml_text(v), **attrs)
    return "\n".join(nx.generate_graphml(flat)) + "\n"


# -- flattening -------------------------------------------------------------------------------------

def _json_clean(value: Any) -> Any:
    """JSON-ready copy: non-finite floats -> None, tuples/sets -> lists, keys -> str."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _json_clean(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return [_json_clean(v) for v in sorted(value, key=str)]
    if isinstance(value, (list, tuple)):
        return [_json_clean(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def _flatten_scope(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The attribute dicts of one scope (graph, nodes or edges) with one GraphML type per name."""
    kinds: dict[str, str] = {}
    for row in rows:
        for k, v in row.items():
            if _present(v):
                kinds[k] = _merge(kinds.get(k), _kind(v))
    return [{xml_text(k): _as(kinds[k], v) for k, v in row.items() if _present(v)} for row in rows]


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and not math.isfinite(v))


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return "str"


def _merge(a: str | None, b: str) -> str:
    if a is None or a == b:
        return b
    if {a, b} == {"int", "float"}:
        return "float"
    return "str"


def _as(kind: str, v: Any) -> Any:
    if kind == "bool" or kind == "int":
        return v
    if kind == "float":
        return float(v)
    if isinstance(v, str):
        return xml_text(v)
    if isinstance(v, (bool, int, float)):
        return json.dumps(v)
    return xml_text(json.dumps(_json_clean(v), sort_keys=True))
