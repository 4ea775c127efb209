"""Host analysis: the one entry point from a node report to everything topoweb shows.

``analyze_host(sections, hostname)`` takes a node report (section kind -> raw text, the kinds of
``apps.domain.parsers.KINDS``) and returns a ``HostAnalysis``. Its ``to_dict()`` is the
*snapshot document*: stored as JSON per snapshot, served by the API and drawn by the UI.
``HostAnalysis.from_dict(doc)`` restores it without re-parsing (the raw report stays the
source of truth; documents are rebuildable).

Snapshot document (schema 1). Every bandwidth is GB/s per direction (1e9 B/s); every key below
is always present (empty list / null when unknown):

{
  "schema": 1,
  "hostname": str,
  "sources": [section kinds that contributed],
  "inferred": bool,                     # True when the hierarchy was reconstructed from topo -m alone
  "summary": {"gpu_count": int, "gpu_model": str|null, "nic_count": int, "active_nic_count": int,
              "nic_rates_gbps": [int, ...],   # line rate Gb/s of each compute NIC port, as ibstat says
              "nvlink": bool, "nvswitch": bool, "sockets": int, "fingerprint": str},
              # fingerprint: stable hash of the layout (GPU count/model, NIC count/rates/states,
              # link classes, link widths) so the cluster page can group identical hosts
  "graph": {"nodes": [{"id": str, "kind": "cpu"|"root_complex"|"root_port"|"switch"|"gpu"|"nic"
                        |"nvswitch"|"nvme"|"other", "label": str, "bdf": str|null, "numa": int|null,
                        "parent": str|null, "inferred": bool, "attrs": {...}}],
            "edges": [{"source": id, "target": id, "kind": "pcie"|"nvlink"|"inter_socket"|"cpu_link",
                        "gen": int|null, "width": int|null, "max_gen": int|null, "max_width": int|null,
                        "links": int|null, "spec_gbs": float|null, "expected_gbs": float|null,
                        "degraded": bool, "inferred": bool, "note": str|null}]},
  "gpus": [{"name": "GPU0", "index": int, "node": graph node id, "bdf": str|null, "uuid": str|null,
            "model": str|null, "numa": int|null, "cpu_affinity": str|null, "nic": HCA name|null}],
  "nics": [{"name": "mlx5_0" or matrix label when unknown, "label": matrix label|null,
            "node": graph node id|null, "bdf": str|null, "port": int|null, "state": str|null,
            "phys_state": str|null, "rate_gbps": float|null, "link_layer": "InfiniBand"|"Ethernet"|null,
            "numa": int|null, "active": bool|null, "compute": bool}],
  "gpu_pairs": [{"a": "GPU0", "b": "GPU1", "path_class": "NV12"|"PIX"|...|"SYS", "mechanism":
                 "nvlink"|"nvswitch"|"pcie_p2p"|"shm", "p2p": bool, "reason": str,
                 "bottleneck_gbs": float, "hops": [hop, ...]}],            # a < b only
  "gpu_nic": [{"gpu": "GPU0", "nic": str, "path_class": str, "gdr": bool, "reason": str,
               "bandwidth_gbs": float, "pxn_via": "GPU3"|null, "hops": [hop, ...]}],   # chosen NIC per GPU
  "gpu_nic_matrix": [{"gpu", "nic", "path_class", "bandwidth_gbs"}],      # every GPU x NIC cell
  "contention": [{"element": node id, "label": str, "kind": "root_complex"|"root_port"|"switch_uplink"
                  |"inter_socket", "scenario": "gpu_to_nic"|"all_pairs", "devices": [names],
                  "flows": int, "demand_gbs": float, "capacity_gbs": float, "ratio": float}],
  "p2p_gaps": [{"a": "GPU0", "b": "GPU5", "reason": str}],
  "findings": [{"rule": "P01", "severity": "CRIT"|"HIGH"|"MED"|"LOW"|"INFO", "title": str,
                "devices": [names], "message": str, "fix": str, "source": str}],
  "estimate": {"b_gpu_gbs": float, "b_node_gbs": float|null, "eta_intra": float, "eta_net": float,
               "points": [{"nodes": int, "busbw_gbs": float, "limit": str}],   # 1..64 nodes
               "limiting_link": str},
  "nccl_settings": [{"name": "NCCL_IB_HCA", "value": str, "reason": str}],
  "warnings": [str]
}

hop = {"from": name, "to": name, "kind": "nvlink"|"pcie"|"inter_socket"|"host_memory_copy"|"fabric"
       |"nvswitch", "spec_gbs": float|null, "expected_gbs": float|null, "flows": int, "note": str|null}

``path_between(doc_a, gpu_a, doc_b, gpu_b)`` (same or different hosts) returns
{"src": "host/GPU0", "dst": "host/GPU5", "same_host": bool, "mechanism": str, "hops": [hop + "host"],
 "bottleneck": index into hops, "bottleneck_gbs": float, "gdr_src": bool|null, "gdr_dst": bool|null,
 "explanation": str}.
"""
