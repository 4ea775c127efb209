"""The fabric part of the path panel: what the page says about the network between two hosts.

``fabric_panel(result) -> dict | None`` reads a cross-host ``path_between`` answer (with the
``fabric_id``/``fabric_reason`` that ``apps.ingest.selectors.path_between_snapshots`` adds) and
returns what ``templates/explorer/_path_panel.html`` shows under the figure (None for a same-host
path or one with no route at all)::

    {"mode": "discovered" | "assumed",
     "line": str,                 # one sentence: routes and narrowest cut, or why the fabric is assumed
     "bottleneck_in_fabric": bool,   # the path's bottleneck is a switch-to-switch stage
     "rows": [{"kind": "link" | "switch", "name", "short", "tier", "rate", "gbs", "spec_gbs", "stage_gbs",
               "links", "equal_cost", "choices", "bottleneck"}],   # leaf -> spine(s) -> leaf in turn;
                                  # gbs/stage_gbs expected (as the hop table), spec_gbs the bundle's spec
     "fabric_id": int | None}

Plain functions of the answer: tested without a database.
"""

from __future__ import annotations

from collections.abc import Mapping

from apps.explorer.fabric_figures import short_name

__all__ = ["fabric_panel", "ASSUMED_HINT"]

#: What the page says when no discovery is stored: how to send one.
ASSUMED_HINT = "send one: agent --fabric"


def _fmt(v: float | None) -> str:
    return "?" if v is None else f"{v:,.1f}"


def _rows(result: Mapping, first_fabric_hop: int | None) -> list[dict]:
    rows, link_no = [], 0
    bn = result.get("bottleneck")
    for e in result.get("fabric_hops") or []:
        if e.get("kind") == "switch":
            rows.append({"kind": "switch", "name": e.get("name"), "short": short_name(e.get("name")),
                         "tier": e.get("tier"), "choices": e.get("choices"), "rate": None, "gbs": None,
                         "stage_gbs": None, "links": None, "equal_cost": None, "bottleneck": False})
            continue
        hop_index = None if first_fabric_hop is None else first_fabric_hop + link_no
        link_no += 1
        rate = " ".join(x for x in (e.get("width"), e.get("speed")) if x) or None
        rows.append({"kind": "link", "name": e.get("name"), "short": f"{short_name(e.get('from'))} -> "
                     f"{short_name(e.get('to'))}", "tier": e.get("tier"), "choices": None, "rate": rate,
                     # expected GB/s, as the hop table and the drawing give them; the spec beside it
                     "gbs": e.get("expected_gbs"), "spec_gbs": e.get("gbs"),
                     "stage_gbs": e.get("stage_expected_gbs"), "links": e.get("links"),
                     "equal_cost": e.get("equal_cost"), "bottleneck": hop_index is not None and hop_index == bn})
    return rows


def fabric_panel(result: Mapping) -> dict | None:
    """The fabric block of the path panel (module docstring)."""
    mode = result.get("fabric")
    if result.get("same_host") or mode not in ("discovered", "assumed"):
        return None
    hops = result.get("hops") or []
    first = next((i for i, h in enumerate(hops) if h.get("host") is None), None)
    rows = _rows(result, first) if mode == "discovered" else []
    bn = result.get("bottleneck")
    in_fabric = (mode == "discovered" and isinstance(bn, int) and 0 <= bn < len(hops)
                 and hops[bn].get("host") is None and (hops[bn].get("tier") or "") not in ("host-leaf", "leaf-host"))
    if mode == "discovered":
        n, ports = result.get("equal_cost_paths") or 0, result.get("equal_cost_port_paths") or 0
        line = (f"Fabric discovered: {result.get('leaf_src') and short_name(result['leaf_src'])} -> "
                f"{result.get('leaf_dst') and short_name(result['leaf_dst'])}, {n} equal-cost route{'' if n == 1 else 's'}"
                f" ({ports} counting parallel cables)")
        cut = result.get("fabric_cut") or {}
        if cut.get("expected_gbs") is not None:
            line += (f"; narrowest cut {_fmt(cut['expected_gbs'])} GB/s per direction"
                     + (" between the leaves: the bottleneck" if cut.get("where") == "fabric" else
                        f" (at the host links; {_fmt(cut.get('leaf_cut_expected_gbs'))} GB/s between the leaves)"))
        line += "."
    else:
        why = result.get("fabric_reason")
        if result.get("fabric_id") is None:
            line = (f"Fabric assumed: {why or f'no discovery stored for this cluster ({ASSUMED_HINT})'}. "
                    "One non-blocking switch per rail is assumed.")
        else:
            line = (f"Fabric assumed: the discovery in force cannot place this route ({why or 'a NIC is not in it'}); "
                    "one non-blocking switch per rail is assumed.")
        named = [e["name"] for e in result.get("fabric_hops") or [] if e.get("kind") == "switch" and not e.get("assumed")]
        if named:  # LLDP's neighbours: the NICs' own switches are known, what joins them is not
            line = (f"Switches named by LLDP: {' and '.join(dict.fromkeys(named))}; "
                    + ("both NICs are on it." if len(set(named)) == 1 else
                       "what connects them is not discovered (a non-blocking path is assumed).")
                    + f" {line.split(': ', 1)[0]}: {why or 'no InfiniBand discovery covers these ports'}.")
    return {"mode": mode, "line": line, "bottleneck_in_fabric": in_fabric, "rows": rows,
            "fabric_id": result.get("fabric_id")}
