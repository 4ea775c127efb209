"""Parser for the ``host_info`` section: host facts the topoweb node agent collects.

This docstring is the contract with the agent (``apps/ingest`` node agent, Python 3.6+).

Format: UTF-8 text, one fact per line, ``key<TAB>value`` (the first TAB separates; the value may
contain spaces and further TABs are kept). Blank lines and lines starting with ``#`` are ignored.
Keys (all optional; unknown keys are kept in ``extra`` with a warning, so newer agents never break
older servers):

=====================  ==========================================================================
key                    value (source)
=====================  ==========================================================================
``cpu_vendor``         ``GenuineIntel`` / ``AuthenticAMD`` / ``ARM`` ... (/proc/cpuinfo ``vendor_id``)
``cpu_family``         decimal (``cpu family``)
``cpu_model``          decimal x86 model id (``model``), e.g. ``143`` = Sapphire Rapids
``cpu_model_name``     free text (``model name``)
``sockets``            decimal (distinct ``physical id``)
``numa_nodes``         decimal (/sys/devices/system/node/node*)
``kernel``             ``uname -r``
``driver_version``     NVIDIA driver, e.g. ``550.54.15`` (/proc/driver/nvidia/version)
``driver_flavor``      ``open`` | ``proprietary`` (``Open Kernel Module`` in that file)
``cmdline``            the IOMMU arguments of /proc/cmdline only (``intel_iommu=``, ``amd_iommu=``,
                       ``iommu=``, ``iommu.passthrough=``); the rest of the command line is never sent
``iommu_group_type``   ``<BDF> <type>``, one line per GPU/NIC function
                       (/sys/bus/pci/devices/<BDF>/iommu_group/type: ``identity``, ``DMA``,
                       ``DMA-FQ``, ``unmanaged``); repeatable
``virtualized``        ``yes`` | ``no`` | ``unknown`` (``hypervisor`` flag in /proc/cpuinfo)
``peermem``            ``nvidia_peermem`` | ``nv_mem`` | ``none`` (/sys/module/nvidia_peermem,
                       /sys/kernel/mm/memory_peers/nv_mem*)
``dmabuf``             ``yes`` | ``no`` | ``unknown`` (open kernel module and kernel >= 5.12)
``nccl_env``           ``NAME=value``, one line per NCCL_* variable of the environment and
                       /etc/nccl.conf (the environment wins); repeatable; only with the agent's
                       ``--include-nccl-env``
``default_route_netdev``  interface of the default route (/proc/net/route); only with
                       ``--include-nccl-env``
``netdev``             ``<name> <operstate>``, e.g. ``ib0 up``; repeatable. By default only the
                       RDMA-capable interfaces (/sys/class/infiniband/*/device/net/*); every
                       interface of /sys/class/net when the agent runs with ``--include-nccl-env``
``netdev_scope``       ``rdma`` | ``all``: which interfaces the ``netdev`` lines cover (absent: ``all``)
=====================  ==========================================================================

Reference producer (Python 3.6, standard library only; the agent run with ``--include-nccl-env``
produces this; without it, it leaves out ``nccl_env`` and ``default_route_netdev`` and lists only
RDMA-capable interfaces with ``netdev_scope rdma``)::

    import glob, os, re
    def _read(p):
        try:
            with open(p) as f:
                return f.read().strip()
        except (IOError, OSError):
            return None
    def host_info():
        out = []
        cpu = _read("/proc/cpuinfo") or ""
        first = {}
        for line in cpu.splitlines():
            k, _, v = line.partition(":")
            first.setdefault(k.strip(), v.strip())
        for key, src in (("cpu_vendor", "vendor_id"), ("cpu_family", "cpu family"),
                         ("cpu_model", "model"), ("cpu_model_name", "model name")):
            if first.get(src):
                out.append((key, first[src]))
        ids = set(re.findall(r"^physical id\\s*:\\s*(\\d+)", cpu, re.M))
        if ids:
            out.append(("sockets", str(len(ids))))
        out.append(("virtualized", "yes" if re.search(r"^flags\\s*:.*\\bhypervisor\\b", cpu, re.M) else "no"))
        out.append(("numa_nodes", str(len(glob.glob("/sys/devices/system/node/node[0-9]*")))))
        out.append(("kernel", os.uname()[2]))
        ver = _read("/proc/driver/nvidia/version") or ""
        m = re.search(r"\\b(\\d+\\.\\d+(?:\\.\\d+)?)\\b", ver)
        if m:
            out.append(("driver_version", m.group(1)))
            out.append(("driver_flavor", "open" if "Open Kernel Module" in ver else "proprietary"))
        iommu = re.findall(r"(?<![\\w.])(?:intel_iommu|amd_iommu|iommu|iommu\\.passthrough)=\\S+",
                           _read("/proc/cmdline") or "")
        if iommu:
            out.append(("cmdline", " ".join(iommu)))
        for dev in sorted(glob.glob("/sys/bus/pci/devices/*")):
            vendor = _read(dev + "/vendor")
            cls = _read(dev + "/class") or ""
            if vendor in ("0x10de", "0x15b3") and cls[:4] in ("0x03", "0x02"):
                t = _read(dev + "/iommu_group/type")
                if t:
                    out.append(("iommu_group_type", os.path.basename(dev) + " " + t))
        if os.path.exists("/sys/module/nvidia_peermem"):
            out.append(("peermem", "nvidia_peermem"))
        elif glob.glob("/sys/kernel/mm/memory_peers/nv_mem*"):
            out.append(("peermem", "nv_mem"))
        else:
            out.append(("peermem", "none"))
        krel = tuple(int(x) for x in re.findall(r"\\d+", os.uname()[2])[:2])
        out.append(("dmabuf", "yes" if "Open Kernel Module" in ver and krel >= (5, 12) else
                    ("no" if ver else "unknown")))
        env = {}
        for line in (_read("/etc/nccl.conf") or "").splitlines():
            k, eq, v = line.strip().partition("=")
            if eq and k.startswith("NCCL_"):
                env[k] = v
        env.update((k, v) for k, v in os.environ.items() if k.startswith("NCCL_"))
        out += [("nccl_env", k + "=" + v) for k, v in sorted(env.items())]
        for line in (_read("/proc/net/route") or "").splitlines()[1:]:
            f = line.split()
            if len(f) > 2 and f[1] == "00000000":
                out.append(("default_route_netdev", f[0]))
                break
        out.append(("netdev_scope", "all"))
        for d in sorted(glob.glob("/sys/class/net/*")):
            out.append(("netdev", os.path.basename(d) + " " + (_read(d + "/operstate") or "unknown")))
        return "".join(k + "\\t" + v.replace("\\n", " ") + "\\n" for k, v in out)

Result: :class:`HostInfo`. ``nccl_env`` is a plain mapping name -> value (later lines win);
``iommu_groups`` maps canonical BDF -> type; ``netdevs`` maps name -> operstate. Derived
properties: ``gdr_module`` (True: a peermem module or DMA-BUF; False: neither; None: unknown),
``iommu_translated`` (BDFs in a translating domain), ``iommu_cmdline`` (the IOMMU words of the
kernel command line), ``iommu_passthrough`` (``iommu=pt`` or ``iommu.passthrough=1`` given).
``iommu_words(text)`` picks those words out of any command line.

Errors: a non-blank, non-comment line without a TAB (``ParseError`` naming it), a number field
that is not a number, a text with no known key at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apps.domain.errors import ParseError
from apps.domain.parsers.text import clean_lines
from apps.domain.pci import canonical_bdf, is_bdf

__all__ = ["HostInfo", "parse", "detect", "KEYS", "iommu_words", "is_passthrough"]

_IOMMU_WORD = re.compile(r"(?<![\w.])(?:intel_iommu|amd_iommu|iommu|iommu\.passthrough)=[^\s\"']+")


def iommu_words(cmdline: str) -> list[str]:
    """The IOMMU arguments of a kernel command line, in order.

    >>> iommu_words("BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt quiet iommu.passthrough=1")
    ['intel_iommu=on', 'iommu=pt', 'iommu.passthrough=1']
    """
    return _IOMMU_WORD.findall(cmdline or "")


def is_passthrough(words: list[str]) -> bool:
    """True when the arguments put the IOMMU in pass-through (``iommu=pt``, ``iommu.passthrough=1``)."""
    return any(w in ("iommu=pt", "iommu.passthrough=1", "iommu.passthrough=y", "iommu.passthrough=on")
               for w in words)

KIND = "host_info"
_INT_KEYS = ("cpu_family", "cpu_model", "sockets", "numa_nodes")
_TEXT_KEYS = ("cpu_vendor", "cpu_model_name", "kernel", "driver_version", "driver_flavor", "cmdline",
              "virtualized", "peermem", "dmabuf", "default_route_netdev", "netdev_scope")
_LIST_KEYS = ("iommu_group_type", "nccl_env", "netdev")
KEYS = _INT_KEYS + _TEXT_KEYS + _LIST_KEYS
_TRANSLATED = {"dma", "dma-fq"}


@dataclass(frozen=True)
class HostInfo:
    cpu_vendor: str | None = None
    cpu_family: int | None = None
    cpu_model: int | None = None
    cpu_model_name: str | None = None
    sockets: int | None = None
    numa_nodes: int | None = None
    kernel: str | None = None
    driver_version: str | None = None
    driver_flavor: str | None = None  # "open" | "proprietary"
    cmdline: str | None = None
    virtualized: bool | None = None
    peermem: str | None = None  # "nvidia_peermem" | "nv_mem" | "none"
    dmabuf: bool | None = None
    iommu_groups: dict = field(default_factory=dict)  # BDF -> type
    nccl_env: dict = field(default_factory=dict)  # NCCL_* name -> value
    default_route_netdev: str | None = None
    netdevs: dict = field(default_factory=dict)  # name -> operstate
    netdev_scope: str | None = None  # "rdma": netdevs lists RDMA interfaces only; None/"all": every one
    extra: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def gdr_module(self) -> bool | None:
        """GPUDirect RDMA kernel support: a peermem module loaded, or DMA-BUF usable."""
        if self.peermem and self.peermem != "none":
            return True
        if self.dmabuf:
            return True
        if self.peermem == "none" and self.dmabuf is False:
            return False
        return None

    @property
    def iommu_translated(self) -> tuple[str, ...]:
        return tuple(sorted(b for b, t in self.iommu_groups.items() if t.lower() in _TRANSLATED))

    @property
    def iommu_cmdline(self) -> str | None:
        return " ".join(iommu_words(self.cmdline or "")) or None

    @property
    def iommu_passthrough(self) -> bool:
        return is_passthrough(iommu_words(self.cmdline or ""))


def detect(text: str) -> int:
    """100 when most non-comment lines are ``known_key<TAB>...``."""
    keys = [ln.split("\t", 1)[0].strip() for ln in text.splitlines()[:200]
            if ln.strip() and not ln.lstrip().startswith("#")]
    if not keys:
        return 0
    known = sum(1 for k in keys if k in KEYS)
    return 100 if known >= 2 and known * 2 >= len(keys) else 0


def _yes(value: str) -> bool | None:
    v = value.strip().lower()
    return True if v in ("yes", "1", "true") else False if v in ("no", "0", "false") else None


def parse(text: str) -> HostInfo:
    """Parse a ``host_info`` section (format in the module docstring).

    >>> h = parse("cpu_vendor\\tGenuineIntel\\ncpu_model\\t143\\npeermem\\tnone\\ndmabuf\\tno\\n"
    ...           "nccl_env\\tNCCL_IB_HCA=mlx5_1\\n")
    >>> h.cpu_model, h.gdr_module, h.nccl_env
    (143, False, {'NCCL_IB_HCA': 'mlx5_1'})
    """
    vals: dict = {}
    iommu: dict[str, str] = {}
    env: dict[str, str] = {}
    netdevs: dict[str, str] = {}
    extra: dict[str, str] = {}
    warnings: list[str] = []
    seen_known = False
    for line_no, line in enumerate(clean_lines(text), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "\t" not in line:
            raise ParseError(KIND, line_no, line, "expected 'key<TAB>value'")
        key, value = line.split("\t", 1)
        key, value = key.strip(), value.strip()
        if key in _INT_KEYS:
            if not re.fullmatch(r"\d+", value):
                raise ParseError(KIND, line_no, line, f"{key} must be a decimal number")
            vals[key] = int(value)
        elif key in ("virtualized", "dmabuf"):
            vals[key] = _yes(value)
        elif key in _TEXT_KEYS:
            vals[key] = value or None
        elif key == "iommu_group_type":
            parts = value.split()
            if len(parts) != 2 or not is_bdf(parts[0]):
                raise ParseError(KIND, line_no, line, "iommu_group_type needs '<BDF> <type>'")
            iommu[canonical_bdf(parts[0])] = parts[1]
        elif key == "nccl_env":
            name, eq, v = value.partition("=")
            if not eq or not name.strip():
                raise ParseError(KIND, line_no, line, "nccl_env needs 'NAME=value'")
            env[name.strip()] = v.strip()
        elif key == "netdev":
            name, _, state = value.partition(" ")
            netdevs[name] = state.strip() or "unknown"
        else:
            extra[key] = value
            warnings.append(f"line {line_no}: unknown key {key!r} kept as extra")
            continue
        seen_known = True
    if not seen_known:
        raise ParseError(KIND, 1, text.splitlines()[0] if text.strip() else "", "no host_info key found")
    flavor = vals.get("driver_flavor")
    if flavor and flavor not in ("open", "proprietary"):
        warnings.append(f"driver_flavor {flavor!r} is neither 'open' nor 'proprietary'")
    peer = vals.get("peermem")
    if peer and peer not in ("nvidia_peermem", "nv_mem", "none"):
        warnings.append(f"peermem {peer!r} is not one of nvidia_peermem, nv_mem, none")
    return HostInfo(iommu_groups=iommu, nccl_env=env, netdevs=netdevs, extra=extra, warnings=tuple(warnings),
                    **vals)
