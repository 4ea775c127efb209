"""Reading a run: its kind and the parser's result (``read_run``), and the hosts, GPUs and NICs it
names (``run_hosts``). The run kinds are the ``run`` family of ``apps.domain.parsers``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apps.domain.parsers import ALL_KINDS, detect_kind, kinds_of, to_jsonable

__all__ = ["RUN_KINDS", "read_run", "run_hosts"]


RUN_KINDS = tuple(kinds_of("run"))


def read_run(text: str, kind: str | None = None) -> tuple[str, dict]:
    """``(kind, parsed)`` of a run's text: ``kind`` detected among the run kinds when not given,
    ``parsed`` the parser's result as plain JSON data. Raises ``UnknownKindError`` (not a run, or a
    kind outside the run family) or ``ParseError`` naming the line."""
    from apps.domain.errors import UnknownKindError

    if kind in (None, "", "auto"):
        kind = detect_kind(text, family="run")
    if kind not in RUN_KINDS:
        raise UnknownKindError(f"{kind!r} is not a run kind; run kinds: {', '.join(RUN_KINDS)}")
    return kind, to_jsonable(ALL_KINDS[kind].parse(text))


def _gpu_entry(rank: Any, device: Any, bdf: Any, bus_id: Any = None, pci_bus: Any = None, model: Any = None) -> dict:
    return {"rank": rank, "device": device, "bdf": bdf, "bus_id": bus_id, "pci_bus": pci_bus, "model": model}


def run_hosts(kind: str, parsed: Mapping) -> list[dict]:
    """The hosts a run names and what it used on each: ``[{"host": name|None, "gpus": [{"rank",
    "device", "bdf", "bus_id", "pci_bus", "model"}], "nics": [names]}]`` in order of appearance.
    One entry with ``host`` None when the output names no host (perftest, P2P tests, nccl-tests
    printed without the "Using devices" list)."""
    if kind == "nccl_tests":
        return _nccl_tests_hosts(parsed)
    if kind == "nccl_log":
        return _nccl_log_hosts(parsed)
    if kind == "perftest":
        gpu = parsed.get("gpu") or {}
        gpus = [_gpu_entry(None, gpu.get("index"), gpu.get("bdf"), gpu.get("pci"), None, gpu.get("name"))] \
            if parsed.get("cuda") else []
        return [{"host": None, "gpus": gpus, "nics": [parsed["device"]] if parsed.get("device") else []}]
    if kind == "p2p_bandwidth":
        return [{"host": None, "nics": [], "gpus": [_gpu_entry(None, d.get("index"), d.get("bdf"), d.get("bus_id"),
                                                               None, d.get("name"))
                                                    for d in parsed.get("devices") or []]}]
    return [{"host": None, "gpus": [], "nics": []}]


def _nccl_tests_hosts(parsed: Mapping) -> list[dict]:
    hosts: dict[str, dict] = {}
    for r in parsed.get("ranks") or []:
        entry = hosts.setdefault(r["host"], {"host": r["host"], "gpus": [], "nics": []})
        entry["gpus"].append(_gpu_entry(r["rank"], r["device"], r.get("bdf"), r.get("bus_id"), r.get("pci_bus"),
                                        r.get("model")))
    return list(hosts.values()) or [{"host": None, "gpus": [], "nics": []}]


def _nccl_log_hosts(parsed: Mapping) -> list[dict]:
    hosts: dict[str, dict] = {h: {"host": h, "gpus": [], "nics": []} for h in parsed.get("hosts") or [] if h}
    seen: set[tuple] = set()
    for c in parsed.get("comms") or []:
        if c.get("host") in hosts and (c["host"], c.get("cuda_dev")) not in seen:
            seen.add((c["host"], c.get("cuda_dev")))
            hosts[c["host"]]["gpus"].append(_gpu_entry(c.get("rank"), c.get("cuda_dev"), c.get("bus_id")))
    for c in parsed.get("connections") or []:
        if c.get("host") in hosts and c.get("device") is not None and (c["host"], c["device"]) not in seen:
            seen.add((c["host"], c["device"]))
            hosts[c["host"]]["gpus"].append(_gpu_entry(None, c["device"], None))
    for n in parsed.get("nics") or []:
        if n.get("host") in hosts and n.get("plugin") != "Socket" and n["name"] not in hosts[n["host"]]["nics"]:
            hosts[n["host"]]["nics"].append(n["name"])
    return list(hosts.values()) or [{"host": None, "gpus": [], "nics": []}]
