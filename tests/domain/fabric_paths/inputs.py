"""Inputs shared by the fabric tests (tests/domain/fabric_*): the real DGX H100 SuperPOD ibnetdiscover
read once, real bundles' documents under the SuperPOD's host names, and small hand-built fabrics
(synthetic, drawn in their docstrings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.domain.fabric import build_fabric
from apps.domain.fabric_paths import FabricView
from apps.domain.parsers import ibnetdiscover

REAL = Path(__file__).resolve().parents[4] / "shared" / "realdata"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
BUNDLES = FIXTURES / "bundles"
SUPERPOD = REAL / "ibnetdiscover" / "nvidia_topograph_dgx_h100_superpod_ndr_mqm9701_40sw_582ca.out"


@pytest.fixture(scope="session")
def superpod_text() -> str:
    return SUPERPOD.read_text()


@pytest.fixture(scope="session")
def superpod(superpod_text):
    return build_fabric(ibnetdiscover.parse(superpod_text))


@pytest.fixture(scope="session")
def superpod_view(superpod) -> FabricView:
    return FabricView.build(superpod)


def bundle_doc(name: str, hostname: str) -> dict:
    """The snapshot document of a real bundle (tests/fixtures/bundles), under another host name."""
    from apps.domain.analysis import analyze_host
    from apps.domain.bundle import read_bundle

    host, sections = read_bundle(BUNDLES / name)
    doc = analyze_host(sections, host).to_dict()
    doc["hostname"] = hostname
    return doc


def ibstat_doc(name: str, hostname: str) -> tuple[dict, dict]:
    """The document and parser results of a host that sent only a real ibstat capture."""
    from apps.domain.analysis import analyze_host

    a = analyze_host({"ibstat": (REAL / "ibstat" / name).read_text()}, hostname)
    return a.doc, a.results


def nic_doc(host: str, nics: dict[str, float | None] | None = None, **nic_fields) -> dict:
    """A synthetic document: GPU0 talks to mlx5_0 over one PCIe hop (GPUDirect RDMA), plus NICs
    ``{name: rate Gb/s}`` (InfiniBand, Active unless ``nic_fields`` say otherwise)."""
    hop = {"from": "GPU0", "to": "mlx5_0", "kind": "pcie", "spec_gbs": 63.0, "expected_gbs": 55.4, "flows": 1,
           "note": None, "from_id": "GPU0", "to_id": "mlx5_0", "assumed": False}
    nics = nics or {"mlx5_0": 400}
    return {"hostname": host, "gpu_pairs": [], "gpus": [{"name": "GPU0"}],
            "nics": [{"name": n, "port": 1, "rate_gbps": r, "link_layer": "InfiniBand", "compute": True,
                      "state": "Active", "active": True, "rail": i, **nic_fields}
                     for i, (n, r) in enumerate(nics.items())],
            "gpu_nic": [{"gpu": "GPU0", "nic": "mlx5_0", "path_class": "PIX", "gdr": True, "reason": "",
                         "pxn_via": None, "hops": [hop], "nic_share": 1}]}


def sw(guid: str, name: str) -> dict:
    return {"guid": guid, "name": name}


def ca(guid: str, name: str) -> dict:
    return {"guid": guid, "name": name, "host": name.split()[0], "kind": "hca"}


def link(a: str, pa: int, b: str, pb: int, width: str = "4X", speed: str = "NDR", state: str | None = None) -> dict:
    return {"a": {"guid": a, "port": pa}, "b": {"guid": b, "port": pb}, "width": width, "speed": speed, "state": state}


def two_leaves(uplink_width: str = "4X", cables: int = 2) -> dict:
    """Synthetic:

    n1 mlx5_0 --\\            /== spine1 ==\\            /-- n3 mlx5_0
                 leaf1 ===<              >=== leaf2
    n2 mlx5_0 --/            \\== spine2 ==/            \\-- n4 mlx5_0

    every '=' is ``cables`` cables of ``uplink_width`` NDR; '-' one 4X NDR (50 GB/s per direction)
    """
    g = {n: f"0x{i:016x}" for i, n in enumerate(["leaf1", "leaf2", "spine1", "spine2", "n1", "n2", "n3", "n4"], 1)}
    links = [link(g["n1"], 1, g["leaf1"], 1), link(g["n2"], 1, g["leaf1"], 2),
             link(g["n3"], 1, g["leaf2"], 1), link(g["n4"], 1, g["leaf2"], 2)]
    for leaf in ("leaf1", "leaf2"):
        for s_i, spine in enumerate(("spine1", "spine2")):
            for c in range(cables):
                port = 10 + 2 * s_i + c
                links.append(link(g[leaf], port, g[spine], 10 + c + (2 if leaf == "leaf2" else 0), uplink_width))
    return {"switches": [sw(g[n], n) for n in ("leaf1", "leaf2", "spine1", "spine2")],
            "cas": [ca(g[n], f"{n} mlx5_0") for n in ("n1", "n2", "n3", "n4")], "links": links, "warnings": []}
