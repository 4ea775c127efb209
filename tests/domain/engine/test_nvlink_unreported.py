"""Azure NDv4's NCCL topology file (ND96asr_v4, 8x A100 SXM4 on NVSwitch) has no device ids and no
<nvlink>: NCCL adds the NVLinks through NVML at run time. Nothing in the file identifies the
NVSwitch, so topoweb does not invent it; it says plainly that NVLink was not reported and keeps
the PCIe path of each pair as "NVLink not reported", not as a confident SHM verdict."""

from __future__ import annotations

from pathlib import Path

from apps.domain.analysis import analyze_host
from apps.domain.bundle import read_bundle

BUNDLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def test_ndv4_xml_pairs_say_nvlink_not_reported():
    host, sections = read_bundle(BUNDLES / "azhpc_ndv4_xml")
    doc = analyze_host(sections, host).doc
    assert doc["graph"]["nvlink_reported"] is False
    assert not doc["summary"]["nvswitch"]  # not invented
    assert doc["gpu_pairs"] and all(p["nvlink_reported"] is False for p in doc["gpu_pairs"])
    assert all(p["reason"].startswith("NVLink not reported") for p in doc["gpu_pairs"])
    assert any("NVLink not reported" in a and "NVML" in a for a in doc["assumptions"])
    # NVLink or not cannot be told: the pairs are unknown, so no PCIe verdict, finding or setting
    assert all(p["mechanism"] == "unknown" and p["p2p"] is None for p in doc["gpu_pairs"])
    assert not [f for f in doc["findings"] if f["rule"] in ("P01", "P02", "P09", "P10")]
    assert not any(s["name"] == "NCCL_P2P_LEVEL" for s in doc["nccl_settings"])
    assert doc["estimate"]["b_gpu_gbs"] is None and "NVLink not reported" in doc["estimate"]["limiting_link"]


def test_nvlink_reported_files_are_unchanged():
    host, sections = read_bundle(BUNDLES / "aws_p4de_xml")  # A100 SXM4 ids: NVSwitch inferred
    doc = analyze_host(sections, host).doc
    assert doc["graph"]["nvlink_reported"] is None
    assert all(p["nvlink_reported"] is True for p in doc["gpu_pairs"])
