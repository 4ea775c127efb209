"""Parser for ``nvidia-smi -q`` (the full per-GPU report), for what the rules read from it.

Layout: a banner and a few host lines, then one block per GPU headed by its PCI address; inside,
``Key : value`` lines and section headers (a line without ``:``) nested by indentation (four
spaces per level; any consistent indentation is read)::

    ==============NVSMI LOG==============
    Timestamp                                 : Fri Jun 21 02:03:08 2024
    Driver Version                            : 535.183.01
    CUDA Version                              : 12.2
    Attached GPUs                             : 8
    GPU 00000000:53:00.0
        Product Name                          : NVIDIA H100 80GB HBM3
        GPU UUID                              : GPU-566e6f65-c38e-b12f-4824-6944218668b9
        Minor Number                          : 0
        PCI
            Bus Id                            : 00000000:53:00.0
            GPU Link Info
                PCIe Generation
                    Max                       : 5
                    Current                   : 5
                    Device Current            : 5
                    Device Max                : 5
                    Host Max                  : N/A
                Link Width
                    Max                       : 16x
                    Current                   : 16x
            Replays Since Reset               : 120
            Replay Number Rollovers           : 0
        Performance State                     : P0
        Fabric
            State                             : Completed
            Status                            : Success

Driver generations differ in details, all read: R410 prints ``Replays since reset`` (lower case)
and no ``Device Current``/``Device Max``/``Host Max``; R555+ adds ``Base Classcode``; R560 adds
``CliqueId``, ``ClusterUUID`` and a ``Health`` sub-section to ``Fabric`` (NVLink5 / NVL72 print
``Clique ID`` / ``Cluster UUID`` on some drivers); older drivers have no ``Fabric`` section at all.
A text that starts inside a GPU block (a pasted ``PCI`` section, a capture cut after it) is read
as one GPU, with a warning. The ``Processes`` section (programs using the GPU) is not read.

Values ``N/A``, ``[N/A]``, ``Not Supported``, ``[Not Supported]``, ``Unknown Error`` and
``Insufficient Permissions`` read as null.

Result :class:`SmiQuery`:

``driver_version``, ``cuda_version``, ``timestamp`` (text as printed, or null), ``attached_gpus``
(int from ``Attached GPUs``, or null), ``gpus`` (tuple of :class:`SmiGpu` in printed order) and
``warnings``. Per GPU (the field names of ``nvidia_smi_gpus`` where the two overlap):

``index``          int: the position in the text, which is the nvidia-smi index (``-q`` prints GPUs in
                   index order, i.e. PCI bus order); null when the text does not hold every GPU
                   (``Attached GPUs`` differs from the GPUs printed, or no header line)
``bdf``            canonical PCI address (``0000:53:00.0``) from the block header, else ``Bus Id``
``name``           ``Product Name``; ``brand`` (``Product Brand``), ``architecture`` (``Product Architecture``)
``uuid``           ``GPU UUID``
``minor_number``   int, N of ``/dev/nvidiaN``; ``module_id`` int (``Module ID``: the SXM slot on HGX boards)
``virtualization_mode``  ``None`` (the word: bare metal), ``Pass-Through`` (a VM), ``VGPU`` ...
``pci_device_id``, ``pci_vendor_id``  4 lowercase hex digits from ``Device Id`` (``0x233010DE``:
                   device ``2330``, vendor ``10de``)
``link_gen_max``, ``link_gen_current``, ``link_gen_gpu_max``, ``link_gen_gpu_current``,
``link_gen_host_max``  ints from ``PCIe Generation`` ``Max``/``Current``/``Device Max``/
                   ``Device Current``/``Host Max``
``link_width_max``, ``link_width_current``  ints from ``Link Width`` (``16x`` -> 16)
``replays_since_reset``, ``replay_rollovers``  ints: PCIe link-level retransmissions since the GPU
                   was last reset, and how often that counter wrapped
``pstate``         ``Performance State`` (``P0``)
``fabric``         :class:`SmiFabric` or null when the text has no ``Fabric`` section: ``state``
                   (``Completed``, ``In Progress``, ``Not Started``...; null for ``N/A``), ``status``
                   (``Success`` or the error text; null for ``N/A``), ``clique_id``, ``cluster_uuid``
                   (NVLink5 multi-node domains), ``health`` ({key: value} of the ``Health`` sub-section
                   as printed, ``N/A`` values null)
``line_no``        line of the GPU's header (or of its first line for a headless block)

Not this kind, rejected with a reason naming the command it is: ``nvidia-smi -q -x`` (XML), the
plain ``nvidia-smi`` table, ``nvidia-smi nvlink -s`` / ``-e`` (``GPU 0: <name> (UUID: ...)`` lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apps.domain.errors import ParseError
from apps.domain.parsers.text import clean_lines
from apps.domain.pci import canonical_bdf

KIND = "nvidia_smi_q"

__all__ = ["SmiFabric", "SmiGpu", "SmiQuery", "parse", "detect"]


@dataclass(frozen=True)
class SmiFabric:
    state: str | None
    status: str | None
    clique_id: str | None
    cluster_uuid: str | None
    health: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SmiGpu:
    index: int | None
    bdf: str | None
    name: str | None
    brand: str | None
    architecture: str | None
    uuid: str | None
    minor_number: int | None
    module_id: int | None
    virtualization_mode: str | None
    pci_device_id: str | None
    pci_vendor_id: str | None
    link_gen_max: int | None
    link_gen_current: int | None
    link_gen_gpu_max: int | None
    link_gen_gpu_current: int | None
    link_gen_host_max: int | None
    link_width_max: int | None
    link_width_current: int | None
    replays_since_reset: int | None
    replay_rollovers: int | None
    pstate: str | None
    fabric: SmiFabric | None
    line_no: int


@dataclass(frozen=True)
class SmiQuery:
    driver_version: str | None
    cuda_version: str | None
    timestamp: str | None
    attached_gpus: int | None
    gpus: tuple[SmiGpu, ...]
    warnings: tuple[str, ...]


BANNER_RE = re.compile(r"^=+\s*NVSMI LOG\s*=+$")
_GPU_RE = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_KV_RE = re.compile(r"^([^:]*?[^\s:])\s*:(?:\s(.*)|)$")
_NVLINK_RE = re.compile(r"^GPU\s+\d+\s*:\s.*\(UUID", re.I)
_PROMPT_RE = re.compile(r"^(?:.*[$#>]\s*)?(?:sudo\s+)?nvidia-smi\b")
_NULLS = {"n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]",
          "insufficient permissions", "[insufficient permissions]", ""}
_HEADER_KEYS = {"timestamp": "timestamp", "driver version": "driver_version", "cuda version": "cuda_version",
                "attached gpus": "attached_gpus"}
_GEN_KEYS = {"max": "link_gen_max", "current": "link_gen_current", "device max": "link_gen_gpu_max",
             "device current": "link_gen_gpu_current", "host max": "link_gen_host_max"}
_TOP_KEYS = {"product name": "name", "product brand": "brand", "product architecture": "architecture",
             "gpu uuid": "uuid", "minor number": "minor_number", "module id": "module_id",
             "performance state": "pstate"}
_INTS = {"minor_number", "module_id", "link_gen_max", "link_gen_current", "link_gen_gpu_max",
         "link_gen_gpu_current", "link_gen_host_max", "link_width_max", "link_width_current",
         "replays_since_reset", "replay_rollovers"}


def _value(text: str | None) -> str | None:
    v = (text or "").strip()
    return None if v.lower() in _NULLS else v


def _int(text: str | None) -> int | None:
    v = _value(text)
    if v is None:
        return None
    m = re.fullmatch(r"(\d+)\s*x?", v, re.I)
    return int(m.group(1)) if m else None


class _Gpu:
    def __init__(self, bdf: str | None, line_no: int) -> None:
        self.bdf = bdf
        self.line_no = line_no
        self.fields: dict[str, object] = {}
        self.fabric: dict[str, object] | None = None
        self.health: dict[str, str | None] = {}

    def set(self, name: str, raw: str, no: int, warnings: list[str]) -> None:
        if name in _INTS:
            value = _int(raw)
            if value is None and _value(raw) is not None:
                warnings.append(f"line {no}: {raw.strip()!r} is not a number; read as unknown")
        else:
            value = _value(raw)
        self.fields.setdefault(name, value)


def _assign(gpu: _Gpu, path: tuple[str, ...], key: str, raw: str, no: int, warnings: list[str]) -> None:
    """File one ``key : value`` line of a GPU block, ``path`` being its enclosing section names."""
    k = key.lower()
    where = tuple(p.lower() for p in path)
    if not where:
        if k in _TOP_KEYS:
            gpu.set(_TOP_KEYS[k], raw, no, warnings)
        return
    if where == ("gpu virtualization mode",) and k == "virtualization mode":
        gpu.set("virtualization_mode", raw, no, warnings)
    elif where == ("pci",):
        if k == "bus id":
            gpu.set("bus_id", raw, no, warnings)
        elif k == "device id":
            gpu.set("device_id", raw, no, warnings)
        elif k == "replays since reset":
            gpu.set("replays_since_reset", raw, no, warnings)
        elif k == "replay number rollovers":
            gpu.set("replay_rollovers", raw, no, warnings)
    elif where == ("pci", "gpu link info", "pcie generation") and k in _GEN_KEYS:
        gpu.set(_GEN_KEYS[k], raw, no, warnings)
    elif where == ("pci", "gpu link info", "link width") and k in ("max", "current"):
        gpu.set("link_width_" + k, raw, no, warnings)
    elif where[0] == "fabric":
        fabric = gpu.fabric if gpu.fabric is not None else {}
        gpu.fabric = fabric
        if len(where) == 1:
            name = {"state": "state", "status": "status", "cliqueid": "clique_id", "clique id": "clique_id",
                    "clusteruuid": "cluster_uuid", "cluster uuid": "cluster_uuid"}.get(k)
            if name:
                fabric.setdefault(name, _value(raw))
        elif where[1] == "health":
            gpu.health.setdefault(key, _value(raw))


def _finish(gpu: _Gpu, index: int | None, warnings: list[str]) -> SmiGpu:
    f = gpu.fields
    bdf = gpu.bdf
    bus = f.get("bus_id")
    if isinstance(bus, str):
        try:
            bus_bdf = canonical_bdf(bus)
        except ValueError:
            warnings.append(f"GPU at line {gpu.line_no}: Bus Id {bus!r} is not a PCI address")
        else:
            if bdf is None:
                bdf = bus_bdf
            elif bus_bdf != bdf:
                warnings.append(f"GPU {bdf}: its PCI section says Bus Id {bus}; the block header is kept")
    dev = vendor = None
    did = f.get("device_id")
    if isinstance(did, str):
        m = re.fullmatch(r"(?:0x)?([0-9a-fA-F]{4})([0-9a-fA-F]{4})", did)
        if m:
            dev, vendor = m.group(1).lower(), m.group(2).lower()
    fabric = None
    if gpu.fabric is not None:
        fb = gpu.fabric
        fabric = SmiFabric(state=fb.get("state"), status=fb.get("status"), clique_id=fb.get("clique_id"),
                           cluster_uuid=fb.get("cluster_uuid"), health=dict(gpu.health))
    return SmiGpu(
        index=index, bdf=bdf, name=f.get("name"), brand=f.get("brand"), architecture=f.get("architecture"),
        uuid=f.get("uuid"), minor_number=f.get("minor_number"), module_id=f.get("module_id"),
        virtualization_mode=f.get("virtualization_mode"), pci_device_id=dev, pci_vendor_id=vendor,
        link_gen_max=f.get("link_gen_max"), link_gen_current=f.get("link_gen_current"),
        link_gen_gpu_max=f.get("link_gen_gpu_max"), link_gen_gpu_current=f.get("link_gen_gpu_current"),
        link_gen_host_max=f.get("link_gen_host_max"), link_width_max=f.get("link_width_max"),
        link_width_current=f.get("link_width_current"), replays_since_reset=f.get("replays_since_reset"),
        replay_rollovers=f.get("replay_rollovers"), pstate=f.get("pstate"), fabric=fabric, line_no=gpu.line_no,
    )


def _indent(line: str) -> int:
    prefix = line[: len(line) - len(line.lstrip())]
    return len(prefix.expandtabs(4))


def parse(text: str) -> SmiQuery:
    """Parse ``nvidia-smi -q`` output into host lines and one record per GPU."""
    lines = clean_lines(text)
    if not any(line.strip() for line in lines):
        raise ParseError(KIND, 0, "", "the text is empty")
    warnings: list[str] = []
    header: dict[str, str | None] = {}
    gpus: list[_Gpu] = []
    gpu: _Gpu | None = None
    stack: list[tuple[int, str]] = []  # enclosing sections of the current line: (indent, name)
    skipping: int | None = None  # indent of a section whose content is not read (Processes)
    banner = False
    headless = False
    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            continue
        indent = _indent(line)
        if skipping is not None:
            if indent > skipping:
                continue
            skipping = None
        if indent == 0:
            if BANNER_RE.match(stripped):
                banner = True
                continue
            if stripped.startswith("<?xml") or stripped.startswith("<nvidia_smi_log"):
                raise ParseError(KIND, no, line, "this is 'nvidia-smi -q -x' (XML) output; send plain 'nvidia-smi -q'")
            if stripped.startswith(("+---", "|")) or "NVIDIA-SMI" in stripped and "Driver Version" in stripped:
                raise ParseError(KIND, no, line, "this is the plain 'nvidia-smi' table, not 'nvidia-smi -q'")
            if _NVLINK_RE.match(stripped):
                raise ParseError(KIND, no, line, "this is 'nvidia-smi nvlink -s' or 'nvlink -e' output "
                                 "(GPU N: <name> (UUID: ...)), not 'nvidia-smi -q'")
            m = _GPU_RE.match(stripped)
            if m:
                gpu = _Gpu(canonical_bdf(m.group(1)), no)
                gpus.append(gpu)
                stack = []
                continue
            if gpu is None and _PROMPT_RE.match(stripped) and not _KV_RE.match(stripped):
                warnings.append(f"line {no}: skipped command line {stripped!r}")
                continue
            kv = _KV_RE.match(stripped)
            if kv and gpu is None:
                key = kv.group(1).strip().lower()
                if key in _HEADER_KEYS:
                    header.setdefault(_HEADER_KEYS[key], _value(kv.group(2)))
                continue  # other host lines are not read
            if kv:
                # a host line after the GPU blocks (never printed by nvidia-smi): not part of a GPU
                warnings.append(f"line {no}: {stripped!r} outside any GPU block; ignored")
                gpu = None
                continue
            raise ParseError(KIND, no, line, "expected 'GPU <PCI address>', a 'Key : value' line or the "
                             "'==============NVSMI LOG==============' banner of 'nvidia-smi -q'")
        # an indented line: part of a GPU block
        if gpu is None:
            if gpus:
                raise ParseError(KIND, no, line, "indented line outside any 'GPU <PCI address>' block")
            gpu = _Gpu(None, no)
            gpus.append(gpu)
            headless = True
            warnings.append(f"line {no}: no 'GPU <PCI address>' header: read as the section(s) of one GPU")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        kv = _KV_RE.match(stripped)
        if kv is None:
            if stripped.lower() == "processes" and not stack:
                skipping = indent
                continue
            stack.append((indent, stripped))
            continue
        key, raw = kv.group(1).strip(), kv.group(2) or ""
        if key.lower() == "processes" and not stack:
            continue  # "Processes : None"
        _assign(gpu, tuple(name for _, name in stack), key, raw, no, warnings)
    if not gpus:
        attached = _int(header.get("attached_gpus"))
        if attached == 0:
            return SmiQuery(header.get("driver_version"), header.get("cuda_version"), header.get("timestamp"),
                            0, (), tuple(warnings))
        raise ParseError(KIND, 0, "", "no 'GPU <PCI address>' block found" + (
            "" if banner else "; is this 'nvidia-smi -q' output?"))
    attached = _int(header.get("attached_gpus"))
    if header.get("attached_gpus") is not None and attached is None:
        warnings.append(f"'Attached GPUs' is {header['attached_gpus']!r}, not a number")
    complete = attached is not None and attached == len(gpus) and not headless
    if attached is not None and attached != len(gpus):
        warnings.append(f"'Attached GPUs' says {attached} but the text holds {len(gpus)} GPU block(s): "
                        "a partial capture, so GPU indices are unknown")
    done = [_finish(g, i if complete else None, warnings) for i, g in enumerate(gpus)]
    seen: dict[str, int] = {}
    for g in done:
        if g.bdf is not None:
            if g.bdf in seen:
                warnings.append(f"GPU {g.bdf} printed twice (lines {seen[g.bdf]} and {g.line_no})")
            seen.setdefault(g.bdf, g.line_no)
    return SmiQuery(header.get("driver_version"), header.get("cuda_version"), header.get("timestamp"),
                    attached, tuple(done), tuple(warnings))


_DETECT_GPU_RE = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*$", re.M)
_DETECT_PCI_RE = re.compile(r"^\s+Bus Id\s+: [0-9A-Fa-f]{4,8}:", re.M)
_DETECT_LINK_RE = re.compile(r"^\s+GPU Link Info\s*$", re.M)


def detect(text: str) -> int:
    """Score ``nvidia-smi -q`` output: its banner, ``GPU <PCI address>`` blocks, or a pasted PCI section."""
    head = text[:6000].lstrip("\ufeff")
    if BANNER_RE.match(head.lstrip().split("\n", 1)[0].strip()):
        return 100
    if _DETECT_GPU_RE.search(head) and (_DETECT_PCI_RE.search(head) or "Product Name" in head):
        return 90
    if _DETECT_PCI_RE.search(head) and _DETECT_LINK_RE.search(head):
        return 80
    return 0
