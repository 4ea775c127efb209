"""Which NICs are "local" to a GPU and which one each channel takes: NCCL's ``ncclTopoGetLocal``,
``ncclTopoGetLocalNet`` and ``ncclTopoGetLocalGpu`` (``src/graph/topo.cc`` at v2.30.7-1 [S3]),
written once for both places that ask: the host graph's NIC choice (:mod:`apps.domain.nic_paths`,
over its GPU x NIC cells) and NCCL's system (:mod:`apps.domain.nccl_system`, over its GPU<->NET
paths) with the channel search reading it (:mod:`apps.domain.nccl_search_tables`).

* :func:`closest` is ``ncclTopoGetLocal`` (L1943-1972): of (name, path type, path GB/s)
  candidates, those with the most bandwidth, then the lowest path type (``bw > maxBw || (bw ==
  maxBw && type < minType)``), so a 400 Gb/s NIC across the host bridge wins over a 100 Gb/s one
  on the GPU's own switch. Unknown bandwidth counts as 0 (the type decides).
* :func:`local_net` is ``ncclTopoGetLocalNet`` (L2039-2075): the ``n`` NICs closest to a GPU are
  shared by the ``k`` GPUs closest to the first of them; the GPU starts at its device index modulo
  ``k`` (bits mirrored, :func:`mirror_bits`, when ``n`` is a power of two) and each channel moves
  one NIC on, over ``ceil(n / k)`` NICs (``NCCL_NETDEVS_POLICY`` AUTO). Two GPUs of one PCIe switch
  with four NICs take the first and the third; one GPU with nine ports on its switch uses all nine.
* :func:`local_gpu` is ``ncclTopoGetLocalGpu`` (L2110-2135): the first GPU local to a NIC that
  picks it on some channel (PXN relays through it).

A *view* answers three questions: ``local_nets(gpu)`` (:func:`closest` over the GPU's NICs),
``local_gpus(nic)`` (over the NIC's GPUs) and ``device(gpu)`` (its CUDA device index).
:class:`PathView` is the view over NCCL path tables (``Path`` records with ``type`` and ``bw``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from apps.domain.paths import nccl_rank

__all__ = ["MAXCHANNELS", "mirror_bits", "closest", "local_net", "local_gpu", "channel_nets", "PathView"]

MAXCHANNELS = 64  # src/include/device.h L91 at v2.30.7-1


class View(Protocol):
    def local_nets(self, gpu: str) -> list[str]: ...
    def local_gpus(self, net: str) -> list[str]: ...
    def device(self, gpu: str) -> int: ...


def mirror_bits(val: int, pow2: int) -> int:
    """NCCL's mirrorBits: reverse the low log2(pow2) bits of ``val``."""
    mirror, b, mb = 0, 1, pow2 >> 1
    while b < pow2:
        if val & b:
            mirror |= mb
        b <<= 1
        mb >>= 1
    return mirror


def closest(cands: Iterable[tuple[str, str | None, float | None]]) -> list[str]:
    """``ncclTopoGetLocal`` over (name, path type, path GB/s): the most bandwidth, then the lowest
    type among those, in the candidates' order. Bandwidths within a millionth count as equal
    (ours are computed sums and minima of the same figures NCCL compares exactly)."""
    cands = list(cands)
    if not cands:
        return []
    top = max((bw or 0.0) for _, _, bw in cands)
    tied = [(x, t) for x, t, bw in cands if math.isclose(bw or 0.0, top, rel_tol=1e-6, abs_tol=1e-6)]
    best = min(nccl_rank(t) for _, t in tied)
    return [x for x, t in tied if nccl_rank(t) == best]


def local_net(view: View, g: str, channel: int = 0) -> str | None:
    """``ncclTopoGetLocalNet``: GPU ``g``'s NIC on ``channel`` (module docstring); None without one."""
    nets = view.local_nets(g)
    if not nets:
        return None
    gpus = view.local_gpus(nets[0]) or [g]
    net = view.device(g) % len(gpus)
    if len(nets) & (len(nets) - 1) == 0:
        net = mirror_bits(net, len(nets))
    net += channel % -(-len(nets) // len(gpus))
    return nets[net % len(nets)]


def channel_nets(view: View, g: str) -> list[str]:
    """The NICs GPU ``g``'s channels take in turn (:func:`local_net` for channel 0, 1, ... until it
    comes back to the first), as ``ncclTopoPrefNetsChannelFirst`` lists them (search.cc L507-529)."""
    out: list[str] = []
    for c in range(MAXCHANNELS):
        n = local_net(view, g, c)
        if n is None or (out and n == out[0]):
            break
        if n not in out:
            out.append(n)
    return out


def _period(view: View, g: str) -> int:
    """After how many channels :func:`local_net` gives GPU ``g`` its first NIC again."""
    nets = view.local_nets(g)
    return -(-len(nets) // len(view.local_gpus(nets[0]) or [g])) if nets else 1


def local_gpu(view: View, net: str) -> str | None:
    """``ncclTopoGetLocalGpu``: the first GPU local to ``net`` that picks it on some channel.

    NCCL asks channels 0 .. MAXCHANNELS - 1 in turn; past the longest period of the candidates
    every channel repeats an earlier one, so the channels after it are not asked (same answer)."""
    cands = view.local_gpus(net)
    span = min(MAXCHANNELS, max((_period(view, g) for g in cands), default=1))
    for c in range(span):
        for g in cands:
            if local_net(view, g, c) == net:
                return g
    return None


class PathView:
    """A view over NCCL path tables: ``to_net[(gpu, net)]`` and ``from_net[(net, gpu)]`` hold
    records with ``type`` and ``bw``; answers are kept (``local_net`` asks once per channel). It
    keeps the tables, not the system they come from."""

    def __init__(self, gpus: Sequence[str], dev: Mapping[str, int], nets: Sequence[str],
                 to_net: Mapping[tuple[str, str], Any], from_net: Mapping[tuple[str, str], Any]):
        self.gpus, self.dev, self.nets = tuple(gpus), dev, tuple(nets)
        self.to_net, self.from_net = to_net, from_net
        self._nets: dict[str, list[str]] = {}
        self._gpus: dict[str, list[str]] = {}

    def device(self, g: str) -> int:
        return self.dev[g]

    def local_nets(self, g: str) -> list[str]:
        got = self._nets.get(g)
        if got is None:
            paths = ((n, self.to_net.get((g, n))) for n in self.nets)
            got = self._nets[g] = closest((n, p.type, p.bw) for n, p in paths if p is not None)
        return got

    def local_gpus(self, net: str) -> list[str]:
        got = self._gpus.get(net)
        if got is None:
            paths = ((g, self.from_net.get((net, g))) for g in self.gpus)
            got = self._gpus[net] = closest((g, p.type, p.bw) for g, p in paths if p is not None)
        return got
