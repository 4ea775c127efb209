"""Citations in rule sources, as links to their public origin: the one place that maps them to URLs.

A rule's ``source`` is a short string such as ``"connect.cc L985-990, L1028-1038 [S10]"`` or
``"paths.cc L511-533 [S2]; env NCCL_NET_GDR_LEVEL [S12]; NCCL #465 [S41]"``. ``cite_parts`` splits
one into ``(text, url)`` parts (``url`` is ``None`` for plain text) that a page renders as links:

* ``[S10]``: the source list of the domain research (``SOURCES``);
* ``connect.cc L985-990``: that file of NCCL at tag v2.30.7-1 (the tag every line number in the rules
  refers to) with the lines anchored, ``.../blob/v2.30.7-1/src/transport/net_ib/connect.cc#L985-L990``.
  A short name NCCL has twice (``init.cc``, ``connect.cc``) is the one an ``[S..]`` id of the same
  clause names, else ``NCCL_FILES``; further ``L..`` refers to the last file named; ``v2.21.5 L279-295``
  refers to that release's file. A file an ``[S..]`` id names outside NCCL (``ibstat.c [S20]``) links
  to that id's URL;
* ``NCCL #465``, ``pytorch #35710``, ``#769`` after one of them: that project's issue or pull request;
* ``domain.md section 1 evaluation notes``, ``domain.md 2.1``, ``and 4.1``: the public source the
  section cites (``DOMAIN_SECTIONS``).

Anything else stays text: an unknown id or file is never a broken link. Pure Python.
"""

from __future__ import annotations

import re
from typing import Iterable

NCCL_TAG = "v2.30.7-1"
NCCL_BLOB = "https://github.com/NVIDIA/nccl/blob/{tag}/{path}"
NCCL_TAGS = {"2.30.7": "v2.30.7-1", "2.21.5": "v2.21.5-1"}  # releases a source names by version

# Short file name -> path in the NCCL tree at v2.30.7-1 (git ls-tree -r v2.30.7-1 --name-only); for a
# name NCCL has twice this is the default, an [S..] id of the same clause picks the other.
NCCL_FILES = {
    "topo.h": "src/graph/topo.h", "paths.cc": "src/graph/paths.cc", "topo.cc": "src/graph/topo.cc",
    "graph.h": "src/include/graph.h", "search.cc": "src/graph/search.cc", "tuning.cc": "src/graph/tuning.cc",
    "xml.cc": "src/graph/xml.cc", "connect.cc": "src/graph/connect.cc", "trees.cc": "src/graph/trees.cc",
    "rings.cc": "src/graph/rings.cc", "init.cc": "src/init.cc", "utils.cc": "src/misc/utils.cc",
    "net_ib/gdr.cc": "src/transport/net_ib/gdr.cc", "gdr.cc": "src/transport/net_ib/gdr.cc",
    "net_ib/init.cc": "src/transport/net_ib/init.cc", "net_ib/connect.cc": "src/transport/net_ib/connect.cc",
    "net_ib/common.h": "src/transport/net_ib/common.h", "common.h": "src/transport/net_ib/common.h",
}

_NCCL = "https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/"
# The source list of the domain research (section 6), id -> URL.
SOURCES = {
    "S1": _NCCL + "graph/topo.h", "S2": _NCCL + "graph/paths.cc", "S3": _NCCL + "graph/topo.cc",
    "S4": _NCCL + "include/graph.h", "S5": _NCCL + "graph/search.cc", "S6": _NCCL + "graph/tuning.cc",
    "S7": _NCCL + "graph/xml.cc", "S8": _NCCL + "transport/net_ib/init.cc", "S9": _NCCL + "transport/net_ib/gdr.cc",
    "S10": _NCCL + "transport/net_ib/connect.cc", "S11": _NCCL + "transport/net_ib/common.h",
    "S72": _NCCL + "misc/utils.cc",
    "S12": "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    "S13": "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs",
    "S14": "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/gpu_troubleshooting.html",
    "S15": "https://github.com/NVIDIA/nccl-tests/blob/03a204a1f38aaea17f1a777885bb2d9600ba7eff/doc/PERFORMANCE.md",
    "S16": "https://github.com/NVIDIA/nccl-tests/blob/03a204a1f38aaea17f1a777885bb2d9600ba7eff/src/all_reduce.cu",
    "S17": "https://docs.nvidia.com/cuda/gpudirect-rdma/",
    "S18": "https://docs.nvidia.com/networking/display/GPUDirectRDMAv18/System+Requirements+and+Recommendations",
    "S19": "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-rdma.html",
    "S28": "https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html",
    "S29": "https://docs.nvidia.com/deploy/nvidia-smi/index.html",
    "S30": "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html",
    "S32": "https://github.com/NVIDIA/NVSentinel/blob/main/docs/configuration/nic-health-monitor.md",
    "S32b": "https://github.com/NVIDIA/NVSentinel/pull/1221",
    "S63": "https://www.nvidia.com/en-us/data-center/nvlink/",
    "S64": "https://docs.nvidia.com/ai-enterprise/planning-resource/optimizing-vm-configuration-ai-inference/latest/appendix.html",
    "S70": "https://developer.download.nvidia.com/compute/DCGM/docs/nvidia-smi-367.38.pdf",
    "S20": "https://github.com/linux-rdma/rdma-core/blob/1d07d99b813f1b248e690427a7caa0cfd1201453/infiniband-diags/ibstat.c",
    "S20b": "https://github.com/linux-rdma/rdma-core/blob/master/libibumad/umad.c",
    "S21": "https://github.com/torvalds/linux/blob/master/drivers/infiniband/core/sysfs.c",
    "S22": "https://kernel.org/doc/Documentation/ABI/testing/sysfs-class-infiniband",
    "S23": "https://github.com/Mellanox/mlnx-tools/blob/master/sbin/show_gids",
    "S24": "https://github.com/Mellanox/mlnx-tools/blob/master/ofed_scripts/ibdev2netdev",
    "S25": "https://github.com/pciutils/pciutils/commit/9f7681202fcfaefd02e202eb64c01eb9e962729d",
    "S26": "https://git.zx2c4.com/linux-dev/commit/?id=56c1af4606f04048e3ae9ab2027a708b9684ff37",
    "S27": "https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-kernel-iommu_groups",
    "S31": "https://github.com/stas00/ml-engineering/blob/744d01e18b79512572f64a6bbd8b5f4a725203a7/network/README.md",
    "S59": "https://hpc-notes.pages.dev/reference/pcie",
    "S69": "https://github.com/BVLC/caffe/blob/master/docs/multigpu.md",
    "S33": "https://github.com/NVIDIA/nccl/issues/2079", "S33b": "https://github.com/NVIDIA/nccl/issues/394",
    "S34": "https://github.com/NVIDIA/nccl/issues/606",
    "S34b": "https://github.com/tinygrad/open-gpu-kernel-modules/issues/45",
    "S35": "https://github.com/NVIDIA/nccl/issues/304", "S36": "https://github.com/NVIDIA/nccl/issues/667",
    "S37": "https://github.com/NVIDIA/nccl/issues/257", "S38": "https://github.com/NVIDIA/nccl-tests/issues/115",
    "S39": "https://github.com/NVIDIA/nccl/issues/1537", "S40": "https://github.com/NVIDIA/nccl/issues/897",
    "S41": "https://github.com/NVIDIA/nccl/issues/465", "S42": "https://github.com/NVIDIA/nccl/issues/489",
    "S43": "https://github.com/NVIDIA/nccl/issues/412", "S44": "https://github.com/NVIDIA/nccl/issues/700",
    "S44b": "https://github.com/NVIDIA/nccl/issues/1591", "S45": "https://github.com/NVIDIA/nccl/issues/426",
    "S46": "https://github.com/NVIDIA/nccl/issues/769", "S48": "https://github.com/NVIDIA/nccl/issues/1600",
    "S49": "https://github.com/NVIDIA/nccl/issues/913", "S49b": "https://github.com/marin-community/marin/issues/7018",
    "S50": "https://github.com/NVIDIA/nccl/issues/286",
    "S51": "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/731",
    "S52": "https://github.com/open-mpi/hwloc/issues/653", "S53": "https://github.com/leptonai/gpud/pull/482",
    "S54": "https://github.com/Mellanox/network-operator/issues/249",
    "S54b": "https://github.com/k8snetworkplumbingwg/sriov-network-device-plugin/issues/269",
    "S55": "https://github.com/aws-samples/aws-deep-learning-ami-ubuntu-dcv-desktop/issues/33",
    "S56": "https://github.com/vllm-project/vllm/issues/16336", "S57": "https://github.com/uccl-project/uccl/pull/803",
    "S58": "https://github.com/NVIDIA/nccl/issues/1505", "S65": "https://github.com/NVIDIA/nccl/issues/1010",
    "S66": "https://github.com/NVIDIA/nccl/issues/1105", "S71": "https://github.com/noonghunna/club-3090/pull/895",
    "S30b": "https://github.com/microsoft/onnxruntime/pull/28066",
}

# "<project> #N": the project's issues (GitHub sends an issue number of a pull request on to it).
ISSUE_REPOS = {
    "nccl": "NVIDIA/nccl", "nccl-tests": "NVIDIA/nccl-tests", "pytorch": "pytorch/pytorch",
    "gpu-burn": "wilicc/gpu-burn", "vllm": "vllm-project/vllm", "uccl": "uccl-project/uccl",
    "network-operator": "Mellanox/network-operator", "onnxruntime": "microsoft/onnxruntime",
    "hwloc": "open-mpi/hwloc", "gpud": "leptonai/gpud", "open-gpu-kernel-modules": "NVIDIA/open-gpu-kernel-modules",
    "aws-samples": "aws-samples/aws-deep-learning-ami-ubuntu-dcv-desktop",
    "sr-iov device plugin": "k8snetworkplumbingwg/sriov-network-device-plugin",
}

# Sections of the domain research a rule cites -> the public source that section itself cites.
DOMAIN_SECTIONS = {
    "1 evaluation notes": _NCCL + "graph/xml.cc#L748-L790",  # the PCI tree from the sysfs realpath
    "2.1": _NCCL + "graph/topo.cc#L545-L557",  # NCCL's PCIe generation table (width*speed/80)
    "4.1": _NCCL + "misc/utils.cc#L27",  # int64ToBusId: the canonical bus id
}

_TOKEN = re.compile(
    r"(?P<sid>\[(?P<sid_id>S\d+[a-z]?)\])"
    r"|(?P<dom>domain\.md(?:\s+sections?)?\s+(?P<dom_sec>\d+(?:\.\d+)?[a-e]?)(?P<dom_notes>\s+evaluation notes)?)"
    r"|(?P<file>\b(?:[A-Za-z_][\w-]*/)*[A-Za-z_]\w*\.(?:cc|cu|h|c)\b)"
    r"|(?P<ver>\bv(?P<ver_no>\d+\.\d+\.\d+)\b)"
    r"|(?P<lines>\bL(?P<l0>\d+)(?:-L?(?P<l1>\d+))?\b)"
    r"|(?P<issue>(?P<issue_repo>\b(?:" + "|".join(re.escape(k) for k in sorted(ISSUE_REPOS, key=len, reverse=True))
    + r"))(?:\s+PR|\s+issues?)?\s+#(?P<issue_no>\d+))"
    r"|(?P<more_issue>(?<=, )#(?P<more_no>\d+))"
    r"|(?P<more_dom>(?<=\band )(?P<more_sec>\d+\.\d+)\b)",
    re.IGNORECASE,
)


_LOOKS_CITED = re.compile(r"\[S\d+[a-z]?\]|\b[A-Za-z_][\w/-]*\.(?:cc|cu|h|c)\b"
                          r"|domain\.md(?:\s+sections?)?\s+[\d.]+[a-e]?(?:\s+evaluation notes)?")


def _basename(url: str) -> str:
    return url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def _line_anchor(l0: str, l1: str | None) -> str:
    return f"#L{l0}-L{l1}" if l1 else f"#L{l0}"


class _Clause:
    """What one ``;``-separated clause has named so far: the file and release line refs point into,
    the project ``#N`` continues, whether a domain.md section was cited."""

    def __init__(self, text: str):
        self.ids = [m for m in re.findall(r"\[(S\d+[a-z]?)\]", text) if m in SOURCES]
        self.file_url: str | None = None
        self.tag = NCCL_TAG
        self.repo: str | None = None
        self.domain = False

    def file(self, name: str) -> str | None:
        """URL of a file name: the [S..] of this clause with that base name, else NCCL's file."""
        base = name.rsplit("/", 1)[-1]
        for sid in self.ids:
            url = SOURCES[sid]
            if _basename(url) == base and (url.startswith(_NCCL) or name not in NCCL_FILES):
                return url
        path = NCCL_FILES.get(name)
        return NCCL_BLOB.format(tag=NCCL_TAG, path=path) if path else None

    def link(self, m: re.Match) -> str | None:
        if m.group("sid"):
            return SOURCES.get(m.group("sid_id"))
        if m.group("dom"):
            self.domain = True
            key = m.group("dom_sec") + (" evaluation notes" if m.group("dom_notes") else "")
            return DOMAIN_SECTIONS.get(key)
        if m.group("more_dom"):
            return DOMAIN_SECTIONS.get(m.group("more_sec")) if self.domain else None
        if m.group("file"):
            self.file_url, self.tag = self.file(m.group("file")), NCCL_TAG
            return self.file_url
        if m.group("ver"):
            self.tag = NCCL_TAGS.get(m.group("ver_no"), self.tag)
            return None
        if m.group("lines"):
            if not self.file_url:
                return None
            url = self.file_url.replace(f"/blob/{NCCL_TAG}/", f"/blob/{self.tag}/") if "NVIDIA/nccl/" in self.file_url \
                else self.file_url
            return url + _line_anchor(m.group("l0"), m.group("l1"))
        if m.group("issue"):
            self.repo = ISSUE_REPOS[m.group("issue_repo").lower()]
            return f"https://github.com/{self.repo}/issues/{m.group('issue_no')}"
        if m.group("more_issue") and self.repo:
            return f"https://github.com/{self.repo}/issues/{m.group('more_no')}"
        return None


def cite_parts(source: str | None) -> list[tuple[str, str | None]]:
    """``source`` as ``[(text, url or None), ...]``; joining the texts gives ``source`` back."""
    text = "" if source is None else str(source)
    parts: list[tuple[str, str | None]] = []
    for clause in _clauses(text):
        state = _Clause(clause)
        pos = 0
        for m in _TOKEN.finditer(clause):
            url = state.link(m)
            if url is None:
                continue
            if m.start() > pos:
                parts.append((clause[pos:m.start()], None))
            parts.append((m.group(0), url))
            pos = m.end()
        if pos < len(clause):
            parts.append((clause[pos:], None))
    return _merge(parts)


def _clauses(text: str) -> list[str]:
    """``text`` cut after each ``;`` outside parentheses (``"L356-362 (v2.30; changed in 2.23) vs ..."``
    is one clause)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")" and depth > 0)
        if ch == ";" and depth == 0:
            out.append(text[start:i + 1])
            start = i + 1
    return out + [text[start:]] if start < len(text) or not out else out


def _merge(parts: Iterable[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for text, url in parts:
        if out and url is None and out[-1][1] is None:
            out[-1] = (out[-1][0] + text, None)
        elif text:
            out.append((text, url))
    return out


def unresolved(source: str | None) -> list[str]:
    """The references in ``source`` that look like citations (``[S..]``, a source file, a domain.md
    section) and have no URL: what a rule's source must not contain."""
    linked = {t for t, u in cite_parts(source) if u}
    text = "" if source is None else str(source)
    out = []
    for m in _LOOKS_CITED.finditer(text):
        if m.group(0) not in linked:
            out.append(m.group(0))
    return out
