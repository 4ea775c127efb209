"""Exports of snapshots and fabrics to the formats other tools read.

One module per format, each a pure function of a snapshot document or a fabric graph:

* :func:`nccl_xml` (:mod:`.nccl_xml`): NCCL topology XML (``NCCL_TOPO_FILE``) of one host;
* :func:`slurm_topology` and :func:`hostlist` (:mod:`.slurm`): Slurm ``topology.conf``, tree or
  block plugin form, from a fabric graph (:func:`apps.domain.fabric.build_fabric`);
* :func:`graph_json` and :func:`graphml` (:mod:`.graph`): the host graph as networkx node-link
  JSON and as GraphML;
* :func:`k8s_labels` and :func:`label_value` (:mod:`.k8s`): Kubernetes node labels
  (``topoweb.io/...``) as YAML documents.

Each raises :class:`ExportError` (a ValueError) when its input cannot be expressed, saying why.
"""

from __future__ import annotations

from apps.domain.exports._common import ExportError
from apps.domain.exports.graph import graph_json, graphml
from apps.domain.exports.k8s import k8s_labels, label_value
from apps.domain.exports.nccl_xml import nccl_xml
from apps.domain.exports.slurm import hostlist, slurm_topology

__all__ = ["ExportError", "nccl_xml", "slurm_topology", "hostlist", "graph_json", "graphml", "k8s_labels",
           "label_value"]
