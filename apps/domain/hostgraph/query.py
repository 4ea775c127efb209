"""Questions asked of a finished HostGraph: the PCIe/CPU chain above a device, the path class of
a pair (the lowest common ancestor rule, domain.md 4.2 item 5) and the PCIe route between two
devices; :func:`frozen` declares a graph unchanging so that their answers are computed once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import networkx as nx

__all__ = ["frozen", "memoized", "ancestors", "link_token", "pcie_class", "path_class", "pcie_path", "lca"]


# (graph, memo) of the graph that ``frozen`` declares unchanging; lookups on it are memoized.
_FROZEN: ContextVar[tuple[nx.Graph, dict] | None] = ContextVar("hostgraph_frozen", default=None)


@contextmanager
def frozen(G: nx.Graph) -> Iterator[nx.Graph]:
    """Declare that ``G`` is not changed inside the block: :func:`ancestors` and
    :func:`pcie_class` answers on it are then computed once per node / pair and reused (a
    snapshot document asks for the same chains thousands of times). Outside the block, or for
    another graph, every call computes afresh; lists returned inside the block are shared and
    must not be mutated."""
    token = _FROZEN.set((G, {}))
    try:
        yield G
    finally:
        _FROZEN.reset(token)


def _memo(G: nx.Graph) -> dict | None:
    f = _FROZEN.get()
    return f[1] if f is not None and f[0] is G else None


def memoized(G: nx.Graph, key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()``, remembered under ``key`` while :func:`frozen` holds ``G`` (else computed
    afresh): how modules reading a finished graph (``paths``) share one memo per document."""
    memo = _memo(G)
    if memo is None:
        return compute()
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def ancestors(G: nx.Graph, node: str) -> list[str]:
    """``node`` followed by its PCIe/CPU parents up to (and including) its cpu node."""
    memo = _memo(G)
    if memo is None:
        return _ancestors(G, node)
    key = ("anc", node)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _ancestors(G, node)
    return found


def _ancestors(G: nx.Graph, node: str) -> list[str]:
    chain = [node]
    seen = {node}
    cur = G.nodes[node].get("parent")
    while cur is not None and cur not in seen and cur in G:
        chain.append(cur)
        seen.add(cur)
        cur = G.nodes[cur].get("parent")
    return chain


def link_token(d: dict) -> str:
    """The matrix token of a GPU-link edge: ``NV12`` (NVLink bond), ``XGMI`` / ``XGMI4`` (AMD xGMI,
    as ``rocm-smi --showtopo`` names it; hwloc gives no link count)."""
    if d.get("fabric") == "xgmi":
        return f"XGMI{d.get('links') or ''}"
    return f"NV{d['links']}"


def _nvlink_class(G: nx.Graph, a: str, b: str) -> str | None:
    if G.has_edge(a, b) and G.edges[a, b]["kind"] == "nvlink":
        return link_token(G.edges[a, b])
    best = None
    for n in G[a]:
        if G.nodes[n]["kind"] == "nvswitch" and G.has_edge(n, b):
            links = min(G.edges[a, n]["links"] or 0, G.edges[n, b]["links"] or 0)
            best = max(best or 0, links)
    return f"NV{best}" if best else None


def pcie_class(G: nx.Graph, a: str, b: str) -> str:
    """The PCIe/CPU path class between two nodes, ignoring NVLink (what ``topo -mp`` prints)."""
    memo = _memo(G)
    if memo is None:
        return _pcie_class(G, a, b)
    key = ("cls", a, b)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _pcie_class(G, a, b)
    return found


def _pcie_class(G: nx.Graph, a: str, b: str) -> str:
    ca, cb = ancestors(G, a), ancestors(G, b)
    sb = set(cb)
    lca = next((n for n in ca if n in sb), None)
    if lca is None:
        return "SYS"
    if lca in (a, b):
        return "PIX"
    kind = G.nodes[lca]["kind"]
    if kind == "cpu":
        return "NODE"
    if kind == "root_complex":
        return "PHB"
    # a switch or root port: one bridge level when both sit directly below it
    if G.nodes[a].get("parent") == lca and G.nodes[b].get("parent") == lca:
        return "PIX"
    return "PXB"


def path_class(G: nx.Graph, a: str, b: str) -> str:
    """topo -m token for the pair (``NV#``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``).

    NVLink first (a direct GPU-GPU bond, or the fabric through an NVSwitch node: the smaller of
    the two GPUs' link counts), then the lowest common PCIe/CPU ancestor (domain.md 4.2 item 5):
    both directly under one switch (or root port) = PIX, a common switch deeper = PXB, the host
    bridge = PHB, two host bridges of one NUMA node = NODE, different NUMA nodes = SYS.

    Examples
    --------
    >>> G = nx.Graph()
    >>> for n, k, p in [("cpu0", "cpu", None), ("rc", "root_complex", "cpu0"), ("sw", "switch", "rc"),
    ...                 ("GPU0", "gpu", "sw"), ("mlx5_0", "nic", "sw"), ("GPU1", "gpu", "rc")]:
    ...     G.add_node(n, kind=k, parent=p)
    >>> path_class(G, "GPU0", "mlx5_0"), path_class(G, "GPU0", "GPU1")
    ('PIX', 'PHB')
    """
    nv = _nvlink_class(G, a, b)
    return nv if nv else pcie_class(G, a, b)


def pcie_path(G: nx.Graph, a: str, b: str) -> list[str]:
    """Node ids of the PCIe/CPU route from ``a`` to ``b`` (both ends included; NVLink ignored).

    Up from ``a`` to the lowest common ancestor and down to ``b``; across sockets the route goes
    ``cpu_a -> cpu_b`` over the inter-socket link.
    """
    ca, cb = ancestors(G, a), ancestors(G, b)
    sb = {n: i for i, n in enumerate(cb)}
    for i, n in enumerate(ca):
        if n in sb:
            return ca[: i + 1] + list(reversed(cb[: sb[n]]))
    return ca + list(reversed(cb))


def lca(G: nx.Graph, a: str, b: str) -> str | None:
    """The lowest common PCIe/CPU ancestor of ``a`` and ``b`` (None when they share none)."""
    sb = set(ancestors(G, b))
    return next((n for n in ancestors(G, a) if n in sb), None)
