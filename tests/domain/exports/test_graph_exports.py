"""Host graph exports: node-link JSON (stable, JSON-clean, read back by networkx) and GraphML
(read back by networkx with every GPU, NIC and switch and every link's gen/width/GB/s)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import networkx as nx
import pytest

from apps.domain.analysis import HostAnalysis, analyze_host
from apps.domain.bundle import read_bundle
from apps.domain.exports import ExportError, graph_json, graphml

BUNDLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


@pytest.fixture(scope="module", params=["dell_xe9680_lspci", "paths_deepep_8xa100_8nic_roce", "stelline_esc8000a"])
def doc(request) -> dict:
    name, sections = read_bundle(BUNDLES / request.param)
    return analyze_host(sections, name).doc


def test_node_link_json_is_stable_clean_and_reads_back(doc: dict) -> None:
    text = graph_json(doc)
    assert text == graph_json(json.loads(json.dumps(doc)))  # a stored (JSON round-tripped) document: same text
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    G = nx.node_link_graph(data, edges="edges")
    H = HostAnalysis.from_dict(doc).host_graph()
    assert set(G) == set(H) and G.number_of_edges() == H.number_of_edges()
    assert data["graph"]["hostname"] == doc["hostname"]
    for e in doc["graph"]["edges"]:
        d = G.edges[e["source"], e["target"]]
        assert (d["kind"], d["gen"], d["width"], d["spec_gbs"]) == (e["kind"], e["gen"], e["width"], e["spec_gbs"])
        assert d.get("citation") == e.get("citation")  # the HostGraph's "source" attr, not an endpoint


def test_graphml_reads_back_with_every_device_and_link_figure(doc: dict) -> None:
    G = nx.read_graphml(io.BytesIO(graphml(doc).encode()))
    nodes = {n["id"]: n for n in doc["graph"]["nodes"]}
    for n, node in nodes.items():
        if node["kind"] in ("gpu", "nic", "switch", "nvswitch"):
            assert G.nodes[n]["kind"] == node["kind"]
            if node["bdf"]:
                assert G.nodes[n]["bdf"] == node["bdf"]
    assert G.number_of_edges() == len(doc["graph"]["edges"])
    for e in doc["graph"]["edges"]:
        d = G.edges[e["source"], e["target"]]
        assert d["kind"] == e["kind"]
        for key in ("gen", "width", "links", "spec_gbs", "expected_gbs", "nccl_gbs"):
            if e.get(key) is not None:
                assert d[key] == pytest.approx(e[key]), key
            else:
                assert key not in d  # GraphML has no null: the attribute is left off
    assert G.graph["hostname"] == doc["hostname"]


def test_graphml_flattens_lists_and_mappings_to_json_text(doc: dict) -> None:
    G = nx.read_graphml(io.BytesIO(graphml(doc).encode()))
    assert json.loads(G.graph["sources"]) == doc["sources"]
    switch = next((n for n in doc["graph"]["nodes"] if n["kind"] == "switch" and n["attrs"].get("port_bdfs")), None)
    if switch:
        assert json.loads(G.nodes[switch["id"]]["port_bdfs"]) == switch["attrs"]["port_bdfs"]


def test_hostile_strings_stay_parseable_in_both() -> None:
    """A host name and an HCA name with control characters, quotes and markup."""
    name, sections = read_bundle(BUNDLES / "paths_deepep_8xa100_8nic_roce")
    sections = {k: v.replace("mlx5_0", "mlx5_0\x1b[31m\"<b>&") for k, v in sections.items()}
    doc = analyze_host(sections, "evil\x00host\n<graph>").doc
    G = nx.read_graphml(io.BytesIO(graphml(doc).encode()))
    assert any("<b>&" in n for n in G) and "\\x00" in G.graph["hostname"]
    assert json.loads(graph_json(doc))["graph"]["hostname"] == "evil\x00host\n<graph>"


def test_a_non_document_is_refused() -> None:
    with pytest.raises(ExportError):
        graphml({"schema": 1})
