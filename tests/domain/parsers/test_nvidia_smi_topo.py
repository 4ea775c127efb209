"""nvidia-smi topo -m / -mp / -p2p parser: real captures, error paths, detectors, render round-trip."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.domain.errors import ParseError
from apps.domain.parsers import nvidia_smi_topo as topo
from apps.domain.parsers.nvidia_smi_topo import TopoGpu, TopoMatrix, TopoNic
from tests.domain.parsers.properties import assert_parses_or_parse_error, edited_document

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LINK = FIXTURES / "nvidia_smi_topo"
PCI = FIXTURES / "nvidia_smi_topo_pci"
P2P = FIXTURES / "nvidia_smi_p2p"
REALDATA = Path("/work/shared/realdata")


def text(folder: Path, name: str) -> str:
    return (folder / name).read_bytes().decode("utf-8", errors="replace")


def all_fixtures() -> list[Path]:
    return sorted(p for d in (LINK, PCI, P2P) for p in d.glob("*.txt"))


def assert_symmetric(r: TopoMatrix) -> None:
    for a, row in r.matrix.items():
        for b, tok in row.items():
            if b in r.matrix:
                assert r.matrix[b][a] == tok, (a, b)


# --------------------------------------------------------------------------- real captures


def test_b200_16nic_lost_tabs_recover_nic9_column_with_warnings() -> None:
    r = topo.parse(text(LINK, "nccl_issue_8xb200_16nic_missing_tabs.txt"))
    assert len(r.gpus) == 8 and [n.device for n in r.nics] == [f"mlx5_{i}" for i in range(16)]
    # line 4 (GPU2) printed 'PXBNODE' for NIC8/NIC9; line 6 (GPU4) 'SYSSYS'
    assert (r.matrix["GPU2"]["NIC8"], r.matrix["GPU2"]["NIC9"]) == ("PXB", "NODE")
    assert (r.matrix["GPU4"]["NIC8"], r.matrix["GPU4"]["NIC9"]) == ("SYS", "SYS")
    assert r.matrix["NIC8"]["NIC9"] == "NODE" and r.matrix["NIC9"]["NIC8"] == "NODE"
    assert r.matrix["NIC9"]["GPU3"] == "PXB" and r.matrix["GPU3"]["NIC9"] == "PXB"
    assert "line 4: split merged token 'PXBNODE' into 'PXB' 'NODE'" in r.warnings
    assert any(w.startswith("line 18:") and "NIC8|NIC9" in w for w in r.warnings)
    assert len([w for w in r.warnings if "SYSSYS" in w]) == 10
    assert_symmetric(r)
    assert all(len(row) == 24 for row in r.matrix.values())


def test_h20_36nic_merged_columns_split_to_a_symmetric_44x44_matrix() -> None:
    r = topo.parse(text(LINK, "h20_8gpu_nv18_36nic_mlx5_0-31_bond0-3_merged_cols_sglang_issue_14092.txt"))
    assert len(r.columns) == 44 and len(r.matrix) == 44
    assert [n.device for n in r.nics][32:] == ["mlx5_bond_0", "mlx5_bond_1", "mlx5_bond_2", "mlx5_bond_3"]
    assert (r.matrix["GPU0"]["NIC34"], r.matrix["GPU0"]["NIC35"]) == ("NODE", "PIX")
    assert (r.matrix["NIC12"]["NIC13"], r.matrix["NIC13"]["NIC12"]) == ("PIX", "PIX")
    assert r.gpus[4].cpu_affinity == "70-99,102-107"
    assert_symmetric(r)
    assert not any("asymmetric" in w for w in r.warnings)


def test_nic_legend_maps_nic_labels_to_hca_names_as_printed() -> None:
    vast = topo.parse(text(LINK, "vastai_8xv100_sxm2_hybridcube_nic0.txt"))
    assert vast.nics == (TopoNic("NIC0", "mlx5_2"),)
    cn = topo.parse(text(LINK, "cn_notes_8xa100_17nic_mlx5_2-17_bond0_single_numa.txt"))
    assert cn.nics[0] == TopoNic("NIC0", "mlx5_2") and cn.nics[16] == TopoNic("NIC16", "mlx5_bond_0")
    prism = topo.parse(text(LINK, "prism_report_4xa100_80g_nv12_rocep49s0.txt"))
    assert prism.nics == (TopoNic("NIC0", "rocep49s0"),)
    # no NIC Legend printed: the HCA behind NIC0 is unknown
    h20 = topo.parse(text(LINK, "h20_8gpu_nv18_2nic_cx6lx_genoa_arthurchiao_notes.txt"))
    assert h20.nics == (TopoNic("NIC0", None), TopoNic("NIC1", None)) and h20.legend is None


def test_older_drivers_name_the_hca_in_the_header() -> None:
    r = topo.parse(text(LINK, "microway_dgx1_v100_4x_mlx5.txt"))
    assert [n.name for n in r.nics] == ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]
    assert all(n.device == n.name for n in r.nics)
    assert r.matrix["GPU0"]["mlx5_0"] == "PIX" and r.matrix["GPU4"]["mlx5_2"] == "PIX"
    assert r.affinity_columns == ("CPU Affinity",) and r.gpus[4].cpu_affinity == "20-39,60-79"


def test_legacy_soc_legend_and_tokens() -> None:
    r = topo.parse(text(LINK, "paddle_8xp40_pcie_switches_soc.txt"))
    assert r.legend == "nvlink_legacy"
    assert r.matrix["GPU0"]["mlx5_0"] == "SOC" and r.matrix["GPU0"]["GPU4"] == "PXB"
    assert topo.normalize_token(r.matrix["GPU0"]["mlx5_0"]) == "SYS"
    k80 = topo.parse(text(LINK, "hpc_blog_k80_4gpu_mlx4_soc_cpuset.txt"))  # header starts at 'GPU0'
    assert k80.legend == "nvlink_legacy" and k80.nics == (TopoNic("mlx4_0", "mlx4_0"),)
    assert [g.cpu_affinity for g in k80.gpus] == ["0-3"] * 4
    azure = topo.parse(text(LINK, "rossumai_azure_nv12_2x_m60_soc.txt"))
    assert azure.matrix == {"GPU0": {"GPU0": "X", "GPU1": "SOC"}, "GPU1": {"GPU0": "SOC", "GPU1": "X"}}
    assert azure.legend is None and azure.warnings == ()


def test_polaris_mangled_header_reads_space_separated_affinity_columns() -> None:
    r = topo.parse(text(LINK, "alcf_polaris_4xa100_nv4_nps4_mangled_header.txt"))
    assert r.columns == ("GPU0", "GPU1", "GPU2", "GPU3", "mlx5_0", "mlx5_1")
    assert r.affinity_columns == ("CPU Affinity", "NUMA Affinity")
    assert (r.gpus[0].cpu_affinity, r.gpus[0].numa_affinity) == ("24-31,56-63", "3")
    assert r.matrix["GPU1"]["mlx5_1"] == "PHB" and r.matrix["GPU3"]["mlx5_0"] == "PHB"
    assert len(r.warnings) == 1 and r.warnings[0].startswith("line 1: header columns separated by spaces")


def test_broken_cell_ph0_115_takes_the_mirror_cell_and_keeps_the_affinity() -> None:
    raw = text(LINK, "brev_shadeform_vm_8xa100_all_phb_truncated_cell_partial.txt")
    r = topo.parse(raw)
    assert all(r.matrix[f"GPU{i}"]["NIC7"] == "PHB" for i in range(8))
    assert all((g.cpu_affinity, g.numa_affinity, g.gpu_numa_id) == ("0-115", "0-3", None) for g in r.gpus)
    broken = [w for w in r.warnings if "'PH0-115'" in w]
    assert len(broken) == 8 and broken[0].startswith("line 2: cell GPU0/NIC7")
    assert "mirror cell NIC7/GPU0 (line 17)" in broken[0]


def test_broken_cell_without_its_mirror_row_is_null_with_a_warning() -> None:
    raw = text(LINK, "brev_shadeform_vm_8xa100_all_phb_truncated_cell_partial.txt")
    gpu_rows_only = "\n".join(raw.splitlines()[:9]) + "\n"
    r = topo.parse(gpu_rows_only)
    assert r.matrix["GPU3"]["NIC7"] is None and r.matrix["GPU3"]["NIC6"] == "PHB"
    assert r.gpus[3].cpu_affinity == "0-115"
    assert any(w.startswith("line 5: cell GPU3/NIC7") and "left null" in w for w in r.warnings)
    assert any(w.startswith("no row for NIC0, NIC1") for w in r.warnings)


def test_partial_captures_keep_the_rows_they_have() -> None:
    talos = topo.parse(text(LINK, "talos_dgx_h100_12nic_partial.txt"))
    assert len(talos.nics) == 12 and set(talos.matrix) == {f"GPU{i}" for i in range(8)} | {
        f"NIC{i}" for i in range(6)}
    assert talos.matrix["GPU0"]["NIC0"] == "PXB" and talos.matrix["GPU7"]["NIC11"] == "PXB"
    assert talos.warnings == ("no row for NIC6, NIC7, NIC8, NIC9, NIC10, NIC11 (partial capture?); "
                              "their cells in the rows present were read",)
    dgx2 = topo.parse(text(LINK, "dgx2_16xv100_nv6_10nic_mlx5_nccl_tests_issue_78_partial.txt"))
    assert len(dgx2.gpus) == 16 and len(dgx2.matrix) == 4 and dgx2.affinity_columns == ("CPU Affinity",)
    assert dgx2.gpus[0].cpu_affinity == "0-23,48-71" and dgx2.gpus[5].cpu_affinity is None
    assert dgx2.matrix["GPU3"]["GPU15"] == "NV6" and dgx2.matrix["GPU2"]["mlx5_0"] == "PXB"


def test_affinity_columns_blank_na_lists_and_gpu_numa_ids() -> None:
    della = topo.parse(text(LINK, "princeton_della_k17g3_8xh100_6nic_slurm_cpuset_affinity_empty_or_1.txt"))
    assert (della.gpus[0].cpu_affinity, della.gpus[0].numa_affinity) == (None, "0")
    assert (della.gpus[4].cpu_affinity, della.gpus[4].numa_affinity) == ("1", "1")
    vm = topo.parse(text(LINK, "sglang_env_4gpu_nv8_17nic_vm_empty_affinity.txt"))
    assert all((g.cpu_affinity, g.numa_affinity, g.gpu_numa_id) == (None, None, None) for g in vm.gpus)
    assert len(vm.nics) == 17 and vm.matrix["GPU0"]["NIC13"] == "PIX"
    gb = topo.parse(text(LINK, "gb200_4gpu_tray_numa_lists_gpu_numa_id_trimmed.txt"))
    assert [g.gpu_numa_id for g in gb.gpus] == ["2", "10", "18", "26"]
    assert gb.gpus[2].numa_affinity == "1,19-25,27-33"
    mooncake = topo.parse(text(LINK, "mooncake_issue_8xnv18_12nic_cpuset_list.txt"))
    assert mooncake.gpus[0].cpu_affinity == "4,6,8,10,12" and mooncake.gpus[0].gpu_numa_id is None


def test_ansi_header_and_trimmed_legend_stay_a_link_matrix() -> None:
    r = topo.parse(text(LINK, "six_gpu_pix_pairs_ansi_header_kvroute_fixture_legend_trimmed.txt"))
    assert r.columns == tuple(f"GPU{i}" for i in range(6)) and r.variant == "link" and r.legend == "current"
    assert r.matrix["GPU4"]["GPU5"] == "PIX" and r.gpus[5].numa_affinity == "1"


def test_hand_mangled_matrix_without_affinity_columns() -> None:
    r = topo.parse(text(LINK, "eight_gpu_pix_phb_sys_hand_mangled_k8s_topology_blog.txt"))
    assert r.affinity_columns == () and r.matrix["GPU3"]["GPU2"] == "PIX" and r.matrix["GPU7"]["GPU6"] == "PIX"
    assert r.legend == "current"
    assert sum("tab lost" in w for w in r.warnings) == 8
    assert_symmetric(r)


def test_topo_mp_files_are_the_pci_variant() -> None:
    dgx1 = topo.parse_pci(text(PCI, "dgx1_topo_mp_pcie_only.txt"))
    assert dgx1.variant == "pci" and dgx1.matrix["GPU0"]["GPU1"] == "PIX" and dgx1.warnings == ()
    assert topo.parse(text(PCI, "dgx1_topo_mp_pcie_only.txt")).variant == "pci"
    igx = topo.parse_pci(text(PCI, "holohub_igx_orin_a6000_cx7_topo_mp.txt"))
    assert igx.nics == (TopoNic("NIC0", "mlx5_0"), TopoNic("NIC1", "mlx5_1")) and igx.matrix["GPU0"]["NIC1"] == "PXB"


def test_parse_pci_refuses_a_link_matrix_naming_the_nvlink_line() -> None:
    with pytest.raises(ParseError) as info:
        topo.parse_pci(text(LINK, "microway_dgx1_v100_4x_mlx5.txt"))
    assert info.value.kind == "nvidia_smi_topo_pci" and info.value.line_no == 2 and "'NV1'" in info.value.reason


def test_parse_pci_without_legend_reads_with_a_warning() -> None:
    r = topo.parse_pci(text(LINK, "rtx_pro_6000_4gpu_box_all_phb.txt").split("Legend")[0])
    assert r.variant == "pci" and any("tells `topo -mp` from `topo -m`" in w for w in r.warnings)


def test_p2p_synthetic_matrices() -> None:
    # Synthetic, following the -p2p legend of domain.md 3.2 (first file without DR, second with DR).
    r = topo.parse_p2p(text(P2P, "synthetic_4gpu_p2p_r_cns_across_switches.txt"))
    assert (r.variant, r.p2p_mode, r.legend, r.nics) == ("p2p", "r", "p2p", ())
    assert r.matrix["GPU0"]["GPU1"] == "OK" and r.matrix["GPU1"]["GPU2"] == "CNS"
    dr = topo.parse_p2p(text(P2P, "synthetic_3gpu_p2p_dr_tns_spaces_no_command.txt"))
    assert dr.p2p_mode is None and dr.matrix["GPU0"]["GPU1"] == "DR" and dr.matrix["GPU2"]["GPU0"] == "TNS"


def test_parse_refuses_p2p_text_and_parse_p2p_refuses_topology_text() -> None:
    with pytest.raises(ParseError) as info:
        topo.parse(text(P2P, "synthetic_4gpu_p2p_r_cns_across_switches.txt"))
    assert info.value.line_no == 3 and "nvidia_smi_p2p" in info.value.reason
    with pytest.raises(ParseError) as info:
        topo.parse_p2p(text(LINK, "ryzen5900x_2x_rtx3090_nvlink_nv4.txt"))
    assert info.value.kind == "nvidia_smi_p2p" and info.value.line_no == 2 and "'NV4'" in info.value.reason


# --------------------------------------------------------------------------- error paths and warnings

CLEAN = text(LINK, "stelline_asus_esc8000a_e12_4x_rtx6000ada.txt")  # header line 1, GPU0 line 2, NIC0 line 6


def test_empty_input_is_line_zero() -> None:
    for blank in ("", "   \n\t\n"):
        with pytest.raises(ParseError) as info:
            topo.parse(blank)
        assert info.value.line_no == 0 and info.value.kind == "nvidia_smi_topo"


def test_text_without_a_matrix() -> None:
    with pytest.raises(ParseError) as info:
        topo.parse("Mon Jun  3 10:00:00 2024\nNo devices were found\n")
    assert info.value.line_no == 0 and "GPU0" in info.value.reason


def test_unknown_token_names_line_and_token() -> None:
    lines = CLEAN.split("\n")
    lines[2] = lines[2].replace("SYS", "QPI", 1)
    with pytest.raises(ParseError) as info:
        topo.parse("\n".join(lines))
    assert info.value.line_no == 3 and "'QPI'" in info.value.reason and "GPU2" in info.value.reason


def test_truncated_row_names_its_line() -> None:
    lines = CLEAN.split("\n")
    lines[6] = "NIC1    NODE    NODE    SYS"
    with pytest.raises(ParseError) as info:
        topo.parse("\n".join(lines))
    assert info.value.line_no == 7 and "truncated" in info.value.reason


def test_row_with_an_extra_cell_is_an_error() -> None:
    lines = CLEAN.split("\n")
    lines[7] = lines[7] + "     PIX"
    with pytest.raises(ParseError) as info:
        topo.parse("\n".join(lines))
    assert info.value.line_no == 8 and "more cells" in info.value.reason


def test_header_without_rows() -> None:
    with pytest.raises(ParseError) as info:
        topo.parse("note\n\tGPU0\tGPU1\tCPU Affinity\n\nLegend:\n")
    assert info.value.line_no == 2 and "not followed by any row" in info.value.reason


def test_mixed_p2p_and_topology_tokens() -> None:
    with pytest.raises(ParseError) as info:
        topo.parse("\tGPU0\tGPU1\tGPU2\nGPU0\tX\tNV4\tOK\nGPU1\tNV4\tX\tOK\nGPU2\tOK\tOK\tX\n")
    assert info.value.line_no == 2 and "mixes" in info.value.reason


def test_duplicate_row_is_an_error() -> None:
    lines = CLEAN.split("\n")
    lines[3] = lines[2]
    with pytest.raises(ParseError) as info:
        topo.parse("\n".join(lines))
    assert info.value.line_no == 4 and "second row for GPU1" in info.value.reason


def test_header_missing_a_label_is_rebuilt_from_square_rows() -> None:
    lines = CLEAN.split("\n")
    lines[0] = lines[0].replace("NIC3    ", "")
    r = topo.parse("\n".join(lines))
    assert r.columns[-1] == "NIC3" and r.matrix["NIC3"]["NIC2"] == "PIX"
    assert any("header rebuilt from rows" in w and w.startswith("line 1:") for w in r.warnings)


def test_matrix_without_header_is_rebuilt_from_rows() -> None:
    body = "\n".join(CLEAN.split("\n")[1:9])
    r = topo.parse("nvidia-smi topo -m\n" + body)
    assert r.columns == ("GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2", "NIC3")
    assert r.gpus[2].cpu_affinity == "32-63" and r.gpus[2].numa_affinity == "1"
    assert r.warnings[0] == "line 2: no header line before the matrix; header rebuilt from rows"


def test_asymmetric_gpu_cells_and_bad_diagonal_are_warnings() -> None:
    lines = CLEAN.split("\n")
    lines[1] = lines[1].replace("NODE", "PIX", 1)  # GPU0/GPU1 PIX, GPU1/GPU0 NODE
    lines[3] = lines[3].replace(" X ", "PHB", 1)  # GPU2/GPU2
    r = topo.parse("\n".join(lines))
    assert r.matrix["GPU0"]["GPU1"] == "PIX" and r.matrix["GPU1"]["GPU0"] == "NODE"
    assert "line 2: asymmetric cells GPU0/GPU1 'PIX' and GPU1/GPU0 'NODE' (line 3)" in r.warnings
    assert any(w.startswith("line 4: cell GPU2/GPU2 reads 'PHB'") for w in r.warnings)


def test_second_matrix_in_the_text_is_reported() -> None:
    one = text(P2P, "synthetic_4gpu_p2p_r_cns_across_switches.txt")
    r = topo.parse_p2p(one + "\n" + one.replace("-p2p r", "-p2p w"))
    assert r.p2p_mode == "r" and any("another matrix" in w for w in r.warnings)


# --------------------------------------------------------------------------- helpers


def test_token_helpers() -> None:
    ranks = [topo.path_rank(t) for t in ("X", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS")]
    assert ranks == sorted(ranks) and len(set(ranks)) == 7
    assert topo.path_rank("SOC") == topo.path_rank("SYS") and topo.path_rank("NV1") == topo.path_rank("NV#")
    assert topo.TOKEN_ORDER[0] == "X" and topo.TOKEN_ORDER[-1] == "SYS"
    assert [topo.normalize_token(t) for t in ("SOC", " X ", "NV12", "pix")] == ["SYS", "X", "NV12", "PIX"]
    assert (topo.nvlink_count("NV12"), topo.nvlink_count("NV4"), topo.nvlink_count("PIX")) == (12, 4, None)
    with pytest.raises(ValueError):
        topo.path_rank("OK")


# --------------------------------------------------------------------------- detectors


@pytest.mark.parametrize("path", all_fixtures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detectors_prefer_the_fixture_kind(path: Path) -> None:
    t = text(path.parent, path.name)
    scores = {"nvidia_smi_topo": topo.detect(t), "nvidia_smi_topo_pci": topo.detect_pci(t),
              "nvidia_smi_p2p": topo.detect_p2p(t)}
    best = max(scores, key=scores.get)
    assert best == path.parent.name and scores[best] >= 90, scores


def other_kinds_texts() -> list[Path]:
    picks = []
    for sub in ("ibstat", "lspci_tree", "lspci_vvv", "nvlink", "nccl_xml", "hwloc", "nccl_tests", "ibv_devinfo"):
        picks += sorted((REALDATA / sub).glob("*"))[:3]
    return picks


def test_detectors_ignore_other_kinds() -> None:
    if not REALDATA.is_dir():
        pytest.fail(f"{REALDATA} is missing: the detectors are checked against its other kinds' captures")
    paths = other_kinds_texts()
    assert paths
    for p in paths:
        t = p.read_bytes().decode("utf-8", errors="replace")
        assert (topo.detect(t), topo.detect_pci(t), topo.detect_p2p(t)) == (0, 0, 0), p.name


# --------------------------------------------------------------------------- render round-trip


@pytest.mark.parametrize("path", all_fixtures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_render_round_trips_every_fixture(path: Path) -> None:
    fn = {"nvidia_smi_topo": topo.parse, "nvidia_smi_topo_pci": topo.parse_pci,
          "nvidia_smi_p2p": topo.parse_p2p}[path.parent.name]
    r = fn(text(path.parent, path.name))
    again = fn(topo.render(r))
    assert (again.gpus, again.nics, again.matrix, again.columns) == (r.gpus, r.nics, r.matrix, r.columns)
    assert again.variant == r.variant and again.legend == r.legend


LINK_TOKENS = st.sampled_from(["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"])
GPU_TOKENS = st.one_of(LINK_TOKENS, st.integers(1, 18).map(lambda n: f"NV{n}"))
CPULIST = st.lists(st.tuples(st.integers(0, 400), st.integers(0, 63)), min_size=1, max_size=3).map(
    lambda parts: ",".join(f"{a}-{a + b}" if b else str(a) for a, b in parts))
AFFINITY_SETS = [(), ("CPU Affinity",), ("CPU Affinity", "NUMA Affinity"),
                 ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")]


@st.composite
def topo_matrices(draw: st.DrawFn) -> TopoMatrix:
    n_gpu = draw(st.integers(1, 16))
    n_nic = draw(st.integers(0, 16))
    header_names = draw(st.booleans())
    gpus_l = [f"GPU{i}" for i in range(n_gpu)]
    nics_l = [f"mlx5_{i}" if header_names else f"NIC{i}" for i in range(n_nic)]
    cols = gpus_l + nics_l
    aff = draw(st.sampled_from(AFFINITY_SETS))
    gpus = []
    for i, name in enumerate(gpus_l):
        vals = {"cpu_affinity": draw(st.none() | CPULIST) if "CPU Affinity" in aff else None,
                "numa_affinity": draw(st.none() | CPULIST) if "NUMA Affinity" in aff else None,
                "gpu_numa_id": draw(st.none() | st.integers(0, 64).map(str)) if "GPU NUMA ID" in aff else None}
        gpus.append(TopoGpu(i, name, **vals))
    nics = tuple(TopoNic(n, n if header_names else draw(st.none() | st.sampled_from(["mlx5_bond_0", "rocep49s0",
                                                                                         f"mlx5_{i + 2}"])))
                 for i, n in enumerate(nics_l))
    matrix: dict[str, dict[str, str | None]] = {c: {} for c in cols}
    for i, a in enumerate(cols):
        matrix[a][a] = "X"
        for b in cols[i + 1:]:
            tok = draw(GPU_TOKENS if a in gpus_l and b in gpus_l else LINK_TOKENS)
            matrix[a][b] = matrix[b][a] = tok
    matrix = {a: {b: matrix[a][b] for b in cols} for a in cols}
    legend = draw(st.sampled_from([None, "current", "nvlink_legacy"]))
    return TopoMatrix("link", None, legend, tuple(cols), aff, tuple(gpus), nics, matrix, ())


@settings(max_examples=150, deadline=None)
@given(topo_matrices())
def test_render_round_trip_on_generated_matrices(r: TopoMatrix) -> None:
    again = topo.parse(topo.render(r))
    assert again.gpus == r.gpus
    assert again.nics == r.nics
    assert again.matrix == r.matrix
    assert (again.variant, again.legend, again.affinity_columns) == ("link", r.legend, r.affinity_columns)
    assert not [w for w in again.warnings if "NIC Legend does not name" not in w]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 16).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.sampled_from(["OK", "CNS", "GNS", "TNS", "NS", "DR", "U"]),
                         min_size=n * n, max_size=n * n))))
def test_render_round_trip_on_generated_p2p_matrices(drawn: tuple[int, list[str]]) -> None:
    n, toks = drawn
    cols = [f"GPU{i}" for i in range(n)]
    matrix = {a: {b: ("X" if a == b else toks[min(i, j) * n + max(i, j)]) for j, b in enumerate(cols)}
              for i, a in enumerate(cols)}
    r = TopoMatrix("p2p", None, "p2p", tuple(cols), (), tuple(TopoGpu(i, c) for i, c in enumerate(cols)), (),
                   matrix, ())
    again = topo.parse_p2p(topo.render(r))
    assert (again.gpus, again.nics, again.matrix, again.variant) == (r.gpus, r.nics, r.matrix, "p2p")


# --------------------------------------------------------------------------- arbitrary text safety


def call_all(t: str) -> None:
    for fn, det, kind in ((topo.parse, topo.detect, topo.KIND_LINK), (topo.parse_pci, topo.detect_pci, topo.KIND_PCI),
                          (topo.parse_p2p, topo.detect_p2p, topo.KIND_P2P)):
        assert_parses_or_parse_error(fn, t, kind, det)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_arbitrary_text_gives_a_result_or_parse_error(t: str) -> None:
    call_all(t)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("GPUNIC0123456789 \tX\nSYSNODEPHBPXBPIXNV-,/A:OK=mlx_5")),
               max_size=300))
def test_topo_shaped_noise_gives_a_result_or_parse_error(t: str) -> None:
    call_all("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" + t)


MUTATION_SOURCES = all_fixtures()


def mutated_fixture():
    return edited_document([text(p.parent, p.name) for p in MUTATION_SOURCES],
                           ops=("drop", "dup", "cut", "tabs", "char", "merge", "swap"), min_edits=1, max_edits=4)


@settings(max_examples=200, deadline=None)
@given(mutated_fixture())
def test_mutated_real_captures_give_a_result_or_parse_error(t: str) -> None:
    call_all(t)


def test_warnings_name_their_line() -> None:
    r = topo.parse(text(LINK, "nccl_issue_8xb200_16nic_missing_tabs.txt"))
    numbers = [int(m.group(1)) for w in r.warnings if (m := re.match(r"line (\d+):", w))]
    assert numbers == sorted(numbers) and len(numbers) == len(r.warnings)


def test_rows_indented_with_a_tab_are_read() -> None:
    r = topo.parse("\tGPU0\tGPU1\tCPU Affinity\n\tGPU0\t X \tNV4\t0-7\n\tGPU1\tNV4\t X \t0-7\n")
    assert r.matrix == {"GPU0": {"GPU0": "X", "GPU1": "NV4"}, "GPU1": {"GPU0": "NV4", "GPU1": "X"}}
    assert r.gpus[1].cpu_affinity == "0-7"


def read_both_ways(t: str, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    """Parse with the fast path for clean rows, then with it disabled (every row the slow way)."""
    def outcome() -> object:
        try:
            return topo.parse(t)
        except ParseError as e:
            return ("error", e.line_no, e.reason)
    fast = outcome()
    with monkeypatch.context() as m:
        m.setattr(topo, "_CELL_WORDS", frozenset())
        slow = outcome()
    return fast, slow


@pytest.mark.parametrize("path", all_fixtures(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fast_path_reads_rows_like_the_general_reader(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = read_both_ways(text(path.parent, path.name), monkeypatch)
    assert fast == slow


@settings(max_examples=150, deadline=None)
@given(mutated_fixture())
def test_fast_path_agrees_on_mutated_captures(t: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        fast, slow = read_both_ways(t, mp)
    assert fast == slow
