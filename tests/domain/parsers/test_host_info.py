"""host_info: the agent's host facts (format in apps/domain/parsers/host_info.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from apps.domain.errors import ParseError
from apps.domain.parsers import KINDS, detect_kind, host_info
from tests.domain.parsers.properties import fixture_lines, mutated_lines, safety_tests

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "host_info"


def test_registered_and_detected() -> None:
    assert KINDS["host_info"].module == "host_info"
    assert detect_kind((FIX / "synthetic_hgx_h100_ready.txt").read_text()) == "host_info"


def test_ready_host() -> None:
    h = host_info.parse((FIX / "synthetic_hgx_h100_ready.txt").read_text())
    assert (h.cpu_vendor, h.cpu_family, h.cpu_model, h.sockets) == ("GenuineIntel", 6, 143, 2)
    assert h.gdr_module is True and h.iommu_translated == ()
    assert h.iommu_cmdline == "iommu=pt intel_iommu=on"
    assert h.nccl_env == {"NCCL_IB_HCA": "=mlx5_0,mlx5_1,mlx5_2,mlx5_3", "NCCL_SOCKET_IFNAME": "eth0"}
    assert h.netdevs["docker0"] == "down" and h.default_route_netdev == "eth0"
    assert h.warnings == ()


def test_broken_host() -> None:
    h = host_info.parse((FIX / "synthetic_gdr_missing_iommu_env.txt").read_text())
    assert h.gdr_module is False and h.virtualized is False
    assert h.iommu_translated == ("0000:41:00.0", "0000:42:00.0")
    assert h.nccl_env["NCCL_P2P_DISABLE"] == "1"
    assert h.extra == {"future_key": "some value"} and "future_key" in h.warnings[0]


@pytest.mark.parametrize("text,line_no,reason", [
    ("cpu_vendor GenuineIntel\n", 1, "key<TAB>value"),
    ("cpu_vendor\tAMD\ncpu_model\t0x11\n", 2, "decimal"),
    ("nccl_env\tNCCL_IB_HCA\n", 1, "NAME=value"),
    ("iommu_group_type\tnot-a-bdf DMA\n", 1, "<BDF> <type>"),
    ("# only a comment\nfoo\tbar\n", 1, "no host_info key"),
])
def test_errors_name_the_line(text: str, line_no: int, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        host_info.parse(text)
    assert info.value.line_no == line_no and reason in info.value.reason


def test_later_env_lines_win_and_peermem_unknown_is_none() -> None:
    h = host_info.parse("nccl_env\tNCCL_ALGO=Tree\nnccl_env\tNCCL_ALGO=Ring\ndmabuf\tunknown\n")
    assert h.nccl_env == {"NCCL_ALGO": "Ring"} and h.gdr_module is None


def _producer_source() -> str:
    doc = host_info.__doc__
    block = doc.split("Reference producer", 1)[1].split("::", 1)[1]
    lines = []
    for line in block.splitlines()[1:]:
        if line.strip() and not line.startswith("    "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines))


def test_reference_producer_is_python36_and_its_output_parses() -> None:
    src = _producer_source()
    assert "def host_info" in src
    assert not re.search(r"\bf\"|\bf'|:=|\bmatch\b", src)  # no f-strings or 3.8+ syntax
    code = src.replace("\\\\", "\\") + "\nimport sys\nsys.stdout.write(host_info())\n"
    env = {k: v for k, v in os.environ.items()}
    env["NCCL_TEST_ONLY"] = "1"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    h = host_info.parse(out.stdout)
    assert h.kernel and h.peermem in ("nvidia_peermem", "nv_mem", "none")
    assert h.nccl_env.get("NCCL_TEST_ONLY") == "1"


def test_iommu_words_and_passthrough_spellings() -> None:
    from apps.domain.parsers.host_info import iommu_words, is_passthrough, parse

    line = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 password=x intel_iommu=on iommu.passthrough=1 quiet"
    assert iommu_words(line) == ["intel_iommu=on", "iommu.passthrough=1"]
    assert is_passthrough(iommu_words(line))
    assert not is_passthrough(iommu_words("amd_iommu=on"))
    h = parse("cpu_vendor\tARM\ncmdline\tiommu.passthrough=1\n")
    assert h.iommu_cmdline == "iommu.passthrough=1" and h.iommu_passthrough


test_fuzz_any_text, test_fuzz_mutated_real_lines = safety_tests(
    host_info.parse, "host_info", mutated_lines(fixture_lines("host_info"), max_size=25), detect=host_info.detect)
