"""The host page shows the "P2P gaps" and "GPU groups" sections of a real capture."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db

K80 = h.FIXTURES / "nvidia_smi_topo" / "hpc_blog_k80_4gpu_mlx4_soc_cpuset.txt"


def test_host_page_lists_p2p_gaps_and_gpu_groups(signed_in):
    h.snapshot(h.cluster(), "k80", {"nvidia_smi_topo": h.read(K80)})
    body = signed_in.get(reverse("explorer:host", args=["lab", "k80"])).content.decode()
    assert 'id="p2p-gaps"' in body and 'id="gpu-groups"' in body
    assert "GPU0-1 and GPU2-3 reach each other only through the CPU: 4 pairs without P2P." in body
    gaps = body.split('id="p2p-gaps"')[1].split('id="gpu-groups"')[0]
    assert gaps.count("<tr><td>GPU") == 4 and "NCCL_P2P_LEVEL=SYS" in gaps
    assert "GPU0-1 under PCIe switch 0 (inferred)." in body and "GPU0-3 use mlx4_0" in body
