"""The bandwidth table: every figure of domain.md section 2, with a source."""

from __future__ import annotations

import pytest

from apps.domain import bandwidth as bw


@pytest.mark.parametrize(
    "gen,width,spec,nccl",
    [(1, 16, 4.0, 3.0), (2, 16, 8.0, 6.0), (3, 16, 15.75, 12.0), (4, 16, 31.5, 24.0), (5, 16, 63.0, 48.0),
     (6, 16, 121.0, 96.0), (4, 8, 15.75, 12.0), (5, 4, 15.75, 12.0)],
)
def test_pcie_link_spec_and_nccl_model_follow_domain_table(gen, width, spec, nccl):
    b = bw.pcie_link(gen, width)
    assert b.spec_gbs == pytest.approx(spec)
    assert b.nccl_gbs == pytest.approx(nccl)  # width * speed / 80
    assert b.expected_gbs == pytest.approx(spec * 0.88)
    assert "domain.md 2.1" in b.source and "[S3]" in b.source


def test_pcie_unknown_generation_gives_no_numbers():
    b = bw.pcie_link(None, 16)
    assert (b.spec_gbs, b.nccl_gbs, b.expected_gbs) == (None, None, None)


@pytest.mark.parametrize(
    "model,links,spec,nccl",
    [
        ("Tesla P100-SXM2-16GB", 4, 80.0, 72.0),
        ("Tesla V100-SXM2-32GB", 6, 150.0, 120.0),
        ("A100-SXM4-40GB", 12, 300.0, 240.0),
        ("NVIDIA A40", 4, 56.25, 48.0),
        ("NVIDIA H100 80GB HBM3", 18, 450.0, 18 * 20.6),
        ("NVIDIA H200", 18, 450.0, 18 * 20.6),
        ("NVIDIA B200", 18, 900.0, 18 * 40.1),
        ("NVIDIA B300 SXM6 AC", 18, 900.0, 18 * 40.1),
        (70, 2, 50.0, 40.0),
        ("sm90", 1, 25.0, 20.6),
        ("8.0", 1, 25.0, 20.0),
    ],
)
def test_nvlink_spec_and_nccl_constants_per_generation(model, links, spec, nccl):
    b = bw.nvlink(model, links)
    assert b.spec_gbs == pytest.approx(spec)
    assert b.nccl_gbs == pytest.approx(nccl)
    assert b.expected_gbs == pytest.approx(spec * 0.88)
    assert "topo.h [S1]" in b.source


def test_nvlink_of_unknown_model_has_no_numbers():
    assert bw.nvlink("Matrox G200", 4).spec_gbs is None


@pytest.mark.parametrize("rate,spec", [(400, 50.0), (200, 25.0), (100, 12.5), (56, 7.0), (2.5, 0.3125)])
def test_ib_port_rate_to_gbs(rate, spec):
    b = bw.ib_port(rate)
    assert b.spec_gbs == pytest.approx(spec)
    assert b.nccl_gbs == pytest.approx(spec)
    assert b.expected_gbs == pytest.approx(spec * 0.93, rel=1e-3)


@pytest.mark.parametrize(
    "vendor,model,nccl",
    [("GenuineIntel", 0x4F, 6.0), ("GenuineIntel", 0x55, 10.0), ("GenuineIntel", 0x6A, 10.0),
     ("GenuineIntel", 0x8F, 22.0), ("GenuineIntel", 0xCF, 40.0), ("AuthenticAMD", 0x31, 16.0),
     ("power", None, 32.0), ("arm", None, 6.0)],
)
def test_inter_socket_uses_nccl_cpu_classes(vendor, model, nccl):
    b = bw.inter_socket(vendor, model)
    assert b.nccl_gbs == nccl
    assert "domain.md 2.4" in b.source


@pytest.mark.parametrize(
    "name,family,links,norm,pcie",
    [
        ("NVIDIA H100 80GB HBM3", "H100", 18, 18, 5),
        ("NVIDIA H100 PCIe", "H100 PCIe", 12, None, 5),
        ("A100-SXM4-40GB", "A100", 12, 12, 4),
        ("NVIDIA A100-SXM4-80GB", "A100", 12, 12, 4),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe", 12, None, 4),
        ("Tesla V100-SXM2-32GB", "V100", 6, 6, 3),
        ("Tesla V100-PCIE-32GB", "V100 PCIe", 0, None, 3),
        ("NVIDIA B200", "B200", 18, 18, 5),
        ("NVIDIA H200", "H200", 18, 18, 5),
        ("NVIDIA H20", "H20", 18, 18, 5),
        ("Tesla P40", "Pascal", 0, None, 3),
        ("NVIDIA L40S", "Ada", 0, None, 4),
    ],
)
def test_gpu_generation_from_printed_names(name, family, links, norm, pcie):
    info = bw.gpu_generation(name)
    assert (info.family, info.nvlink_links, info.nvswitch_norm, info.pcie_gen) == (family, links, norm, pcie)


def test_unknown_gpu_name_is_unknown():
    info = bw.gpu_generation("Some Future GPU")
    assert info.family is None and info.nvlink_links == 0


def test_pcie_generation_from_gts():
    from apps.domain.pci import pcie_generation  # the one GT/s -> generation map

    assert [pcie_generation(x) for x in (2.5, 5, 8, 16, 32, 64, 7)] == [1, 2, 3, 4, 5, 6, None]
