"""Kubernetes node labels: the topoweb.io/ labels of real reports, values within Kubernetes' rules
(hostile names included), YAML that reads back as strings, and the leaf from a fabric."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from apps.domain.analysis import analyze_host
from apps.domain.bundle import read_bundle
from apps.domain.exports import ExportError, k8s_labels, label_value
from apps.domain.exports.k8s import node_labels
from apps.domain.fabric import build_fabric
from apps.domain.parsers import ibnetdiscover

FIX = Path(__file__).resolve().parents[2] / "fixtures"
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")  # Kubernetes' validation regex


def bundle(name: str, hostname: str | None = None) -> dict:
    host, sections = read_bundle(FIX / "bundles" / name)
    return analyze_host(sections, hostname or host).doc


def nodes(text: str) -> dict[str, dict]:
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert all(d["apiVersion"] == "v1" and d["kind"] == "Node" for d in docs)
    return {d["metadata"]["name"]: d["metadata"]["labels"] for d in docs}


def test_labels_of_real_reports() -> None:
    text = k8s_labels([bundle("paths_deepep_8xa100_8nic_roce"), bundle("stelline_esc8000a"), bundle("paddle_8xp40"),
                       bundle("dell_xe9680_lspci")])
    got = nodes(text)
    assert got["deepep-a100-node"] == {"topoweb.io/gpu-count": "8", "topoweb.io/nvlink-domain": "deepep-a100-node",
                                       "topoweb.io/rail-health": "ok"}
    assert got["stelline-esc8000a-e12"]["topoweb.io/rail-health"] == "down"  # every HCA port Down
    assert got["stelline-esc8000a-e12"]["topoweb.io/gpu-model"] == "RTX-6000-Ada-Generation"
    assert got["paddle-8xp40"]["topoweb.io/nvlink-domain"] == "none"
    assert "topoweb.io/rail-health" not in got["dell-xe9680"]  # no port state reported: not guessed
    assert list(got) == sorted(got)


def test_a_down_compute_port_makes_the_rails_degraded() -> None:
    doc = bundle("paths_deepep_8xa100_8nic_roce")
    doc["nics"][0]["active"] = False
    doc["nics"][0]["state"] = "Down"
    assert node_labels(doc)["topoweb.io/rail-health"] == "degraded"


def test_nvlink_domain_is_left_out_when_no_source_shows_nvlink() -> None:
    assert "topoweb.io/nvlink-domain" not in node_labels(bundle("synthetic_hgx_h100_gpu_x8"))


@pytest.mark.parametrize("raw, value", [
    ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
    ("  --leading and trailing__  ", "leading-and-trailing"),
    ("x" * 80, "x" * 63),
    ("a" * 62 + "-b", "a" * 62),  # cut at 63, then the non-alphanumeric end dropped
    ("GPU: A100\nkind: Secret", "GPU-A100-kind-Secret"),
    ("Tesla\u00e9 V100", "Tesla-V100"),
    ("\"quoted\" 'value' ${x}", "quoted-value-x"),
    ("---", ""),
])
def test_label_values_follow_kubernetes_rules(raw: str, value: str) -> None:
    assert label_value(raw) == value
    assert len(value) <= 63 and LABEL_VALUE.match(value)


def test_hostile_names_never_break_the_yaml() -> None:
    """SYNTHETIC: real reports renamed with YAML/markup injection in the host name and GPU model."""
    evil = bundle("paths_deepep_8xa100_8nic_roce", "Node-7")
    evil["summary"]["gpu_model"] = "A100\"\n  evil: true # \x1b[0m" + "z" * 100
    bad_host = bundle("paddle_8xp40", "bad host\nmetadata:\n  name: kube-apiserver")
    text = k8s_labels([evil, bad_host])
    got = nodes(text)
    assert list(got) == ["node-7"]  # lowercased: a valid node name; the other is only a comment
    labels = got["node-7"]
    assert all(isinstance(v, str) and len(v) <= 63 and LABEL_VALUE.match(v) for v in labels.values())
    assert labels["topoweb.io/gpu-model"].startswith("A100-evil-true-0mzzz")
    assert "# left out: host 'bad host\\nmetadata:" in text and "kube-apiserver\n" not in text


def test_numbers_and_words_yaml_would_retype_stay_strings() -> None:
    doc = bundle("paddle_8xp40", "true")
    doc["summary"]["gpu_model"] = "1e3"
    labels = nodes(k8s_labels([doc]))["true"]
    assert labels["topoweb.io/gpu-model"] == "1e3" and labels["topoweb.io/gpu-count"] == "8"


def test_leaf_comes_from_the_fabric_by_host_name() -> None:
    G = build_fabric(ibnetdiscover.parse((FIX / "ibnetdiscover" / "synthetic_partial_discovery_node_name_map.txt")
                                         .read_text()))
    labels = nodes(k8s_labels([bundle("paths_deepep_8xa100_8nic_roce", "node03.cluster")], G))["node03.cluster"]
    assert labels["topoweb.io/leaf"] == "leaf02"  # node03 of the fabric, by its short name


def test_superpod_leaf_is_the_first_rail_of_a_multi_rail_host() -> None:
    G = build_fabric(ibnetdiscover.parse((FIX / "ibnetdiscover" /
                                          "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.txt").read_text()))
    labels = node_labels(bundle("paths_deepep_8xa100_8nic_roce", "a08-p1-dgx-04-c17"), G)
    assert labels["topoweb.io/leaf"] == "A09-P1-IBLEAF-01-04"  # mlx5_0's leaf (rails on 01-04 .. 04-04)


def test_nothing_to_label_is_refused() -> None:
    with pytest.raises(ExportError):
        k8s_labels([])
