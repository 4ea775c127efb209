"""Kubernetes node labels (``topoweb.io/...``) from snapshot documents, as YAML documents.

``k8s_labels(docs, fabric=None)`` writes one YAML document per host::

    ---
    apiVersion: v1
    kind: Node
    metadata:
      name: "dgx-01"
      labels:
        topoweb.io/gpu-model: "NVIDIA-H100-80GB-HBM3"
        topoweb.io/gpu-count: "8"
        topoweb.io/nvlink-domain: "dgx-01"
        topoweb.io/leaf: "A09-P1-IBLEAF-04-04"
        topoweb.io/rail-health: "ok"

Apply it with ``kubectl apply --server-side --field-manager=topoweb -f FILE`` (server-side apply
merges these labels into the existing Node objects and leaves everything else alone), or one
node at a time with ``kubectl patch node NAME --type merge --patch-file``.

Labels (a label is left out when the report cannot tell, never guessed):

* ``topoweb.io/gpu-model``: the GPU model as reported (``summary.gpu_model``);
* ``topoweb.io/gpu-count``: the number of GPUs;
* ``topoweb.io/nvlink-domain``: the NVLink domain the host's GPUs share: the host's name when
  every GPU reaches every other over NVLink (an NVSwitch, or NVLink links and relays between all
  of them; node reports carry no multi-node NVLink clique id, so each host is its own domain),
  ``partial`` when only some GPUs are NVLink-connected, ``none`` without NVLink; left out when
  no source of the report can show NVLink;
* ``topoweb.io/leaf`` (with a fabric graph): the leaf switch most of the host's adapters are
  cabled to (the first adapter's on a tie: rail 0 of a rail-optimised fabric), its name as the
  Slurm export writes it;
* ``topoweb.io/rail-health``: ``down`` when no compute NIC port is Active (``network.state``
  ``all_down``), ``degraded`` when a compute port is not Active, a finding says a NIC link is
  slow or unusable (F01, F02, F03, G06), or (with a fabric graph) a fabric link of the host is
  down or downtrained, ``ok`` when every compute port is Active and none of that holds; left
  out when the port states are not reported.

Label values follow Kubernetes' rules: at most 63 characters of ``[A-Za-z0-9._-]``, beginning
and ending with a letter or digit (:func:`label_value`); a value with nothing left is left out.
Node names are the hosts' names lowercased when that is a valid Kubernetes node name (RFC 1123
subdomain); a host whose name is not is listed in a comment instead. Every string is written in
double quotes, so YAML never reads a value as a number, a boolean or null.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import networkx as nx

from apps.domain.exports._common import ExportError, checked_doc, comment_text, natural_key
from apps.domain.exports._leaves import attachments, switch_names
from apps.domain.fabric import host_cas
from apps.domain.fabric_health import degraded_links, down_ports

__all__ = ["k8s_labels", "label_value", "node_labels", "PREFIX"]

PREFIX = "topoweb.io/"
_LABEL_BAD_RE = re.compile(r"[^A-Za-z0-9._-]+")
_ENDS_RE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")
_NODE_NAME_RE = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_RAIL_RULES = {"F01", "F02", "F03", "G06"}  # port not Active, rate low, no LID/SM, NIC PCIe too narrow


def label_value(value: Any) -> str:
    """``value`` as a Kubernetes label value: runs of other characters as ``-``, non-alphanumeric
    ends dropped, at most 63 characters ("" when nothing is left).

    >>> label_value("NVIDIA H100 80GB HBM3"), label_value("  ;rm -rf /  "), label_value("é" * 3)
    ('NVIDIA-H100-80GB-HBM3', 'rm--rf', '')
    """
    text = _LABEL_BAD_RE.sub("-", str(value))
    text = _ENDS_RE.sub("", text)
    return _ENDS_RE.sub("", text[:63])


def node_labels(doc: Mapping[str, Any], fabric: nx.Graph | None = None) -> dict[str, str]:
    """The ``topoweb.io/`` labels of one host (raw values, before :func:`label_value`).

    With ``fabric``, the host is found among the fabric's hosts by its name (short names match)."""
    doc = checked_doc(doc)
    labels: dict[str, str | None] = {
        "gpu-model": doc["summary"].get("gpu_model"),
        "gpu-count": str(doc["summary"].get("gpu_count") or len(doc["gpus"])),
        "nvlink-domain": _nvlink_domain(doc),
        "leaf": None,
        "rail-health": _rail_health(doc),
    }
    if fabric is not None:
        leaf, fabric_trouble = _fabric_facts(fabric, doc["hostname"])
        labels["leaf"] = leaf
        if fabric_trouble and labels["rail-health"] == "ok":
            labels["rail-health"] = "degraded"
    return {PREFIX + k: v for k, v in labels.items() if v is not None}


def k8s_labels(docs: Iterable[Mapping[str, Any]], fabric: nx.Graph | None = None) -> str:
    """YAML documents (one per host, in host name order) labelling Kubernetes nodes.

    Parameters
    ----------
    docs : iterable of mappings
        Snapshot documents, one per host (the newest of each).
    fabric : nx.Graph, optional
        The cluster's fabric graph (:func:`apps.domain.fabric.build_fabric`), for the leaf label
        and the fabric side of rail health.

    Raises
    ------
    ExportError
        An item is not a snapshot document, or no document is given.

    Examples
    --------
    >>> from apps.domain.analysis import analyze_host
    >>> topo = "\\tGPU0\\tGPU1\\nGPU0\\t X \\tNV12\\nGPU1\\tNV12\\t X \\n"
    >>> doc = analyze_host({"nvidia_smi_topo": topo}, "Node-1").doc
    >>> print(k8s_labels([doc]).split("---")[1].strip())
    apiVersion: v1
    kind: Node
    metadata:
      name: "node-1"
      labels:
        topoweb.io/gpu-count: "2"
        topoweb.io/nvlink-domain: "Node-1"
    """
    docs = sorted((checked_doc(d) for d in docs), key=lambda d: natural_key(d["hostname"]))
    if not docs:
        raise ExportError("no snapshot to label")
    out = ["# Kubernetes node labels written by topoweb from snapshot documents;",
           "# apply with: kubectl apply --server-side --field-manager=topoweb -f <this file>"]
    for doc in docs:
        name = doc["hostname"].strip().lower()
        if not _NODE_NAME_RE.match(name):
            out.append(comment_text(f"# left out: host {doc['hostname']!r} is not a valid Kubernetes node name"))
            continue
        labels = {k: label_value(v) for k, v in node_labels(doc, fabric).items()}
        out += ["---", "apiVersion: v1", "kind: Node", "metadata:", f"  name: {_quote(name)}", "  labels:"]
        out += [f"    {k}: {_quote(v)}" for k, v in sorted(labels.items()) if v]
    return "\n".join(out) + "\n"


# -- the labels -------------------------------------------------------------------------------------

def _nvlink_domain(doc: Mapping[str, Any]) -> str | None:
    if (doc.get("graph") or {}).get("nvlink_reported") is False:
        return None
    pairs = doc["gpu_pairs"]
    if not pairs:
        return "none" if doc["gpus"] and not doc["summary"].get("nvlink") else None
    nv = [p for p in pairs if p.get("mechanism") in ("nvlink", "nvswitch")]
    if not nv:
        return "none"
    return doc["hostname"] if len(nv) == len(pairs) else "partial"


def _rail_health(doc: Mapping[str, Any]) -> str | None:
    network = doc.get("network") or {}
    if network.get("state") == "all_down":
        return "down"
    compute = [n for n in doc["nics"] if n.get("compute")]
    if not compute:
        return None
    troubled = any(f.get("rule") in _RAIL_RULES for f in doc["findings"])
    if any(n.get("active") is False for n in compute) or troubled:
        return "degraded"
    if all(n.get("active") is True for n in compute):
        return "ok"
    return None


def _fabric_facts(G: nx.Graph, hostname: str) -> tuple[str | None, bool]:
    """(the host's leaf switch name, whether a fabric link or port of the host is down or slow)."""
    att = attachments(G)
    short = hostname.split(".")[0].lower()
    host = next((h for h in att.leaves if h == hostname), None) or next(
        (h for h in att.leaves if h.split(".")[0].lower() == short), None)
    if host is None:
        return None, False
    leaf = att.primary(host)
    cas = {ca for ca in host_cas(G) if (G.nodes[ca].get("host") or "").split(".")[0].lower() == short}
    down = any(r["node"] in cas for r in down_ports(G))
    slow = any(set(_link_ends(r)) & cas for r in degraded_links(G))
    return (switch_names(G)[leaf] if leaf else None), down or slow


def _link_ends(row: Mapping[str, Any]) -> list[str]:
    return [v for k, v in row.items() if k in ("a", "b", "u", "v", "node", "peer") and isinstance(v, str)]


def _quote(text: str) -> str:
    """A YAML double-quoted scalar (JSON's escaping is valid YAML)."""
    return json.dumps(text, ensure_ascii=True)
