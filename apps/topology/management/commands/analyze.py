"""python manage.py analyze (--bundle DIR | --topo F --ibstat F ...) [--hostname H] [--format json|text]:
analyse one host's captured outputs and print its snapshot document (or readable tables)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.domain.analysis import analyze_host
from apps.domain.bundle import BundleError, read_bundle
from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.shellsafe import export_block

# option -> registry kind
FILE_OPTIONS = {
    "topo": "nvidia_smi_topo",
    "topo_pci": "nvidia_smi_topo_pci",
    "p2p": "nvidia_smi_p2p",
    "gpus": "nvidia_smi_gpus",
    "nvlink": "nvidia_smi_nvlink",
    "lspci_tree": "lspci_tree",
    "lspci_verbose": "lspci_verbose",
    "ibstat": "ibstat",
    "ibstatus": "ibstatus",
    "ibv_devinfo": "ibv_devinfo",
    "sysfs_pci": "sysfs_pci",
    "sysfs_ib": "sysfs_ib",
    "nccl_xml": "nccl_topo_xml",
    "hwloc": "hwloc_xml",
    "host_info": "host_info",
    "smi_q": "nvidia_smi_q",
    "nvlink_errors": "nvidia_smi_nvlink_errors",
    "show_gids": "show_gids",
    "ib_counters": "ib_counters",
    "ethtool_stats": "ethtool_stats",
}


def add_host_arguments(parser, *, bundles: str = "one") -> None:
    """The per-file options of one host (``FILE_OPTIONS``) and ``--bundle`` (``bundles="many"``:
    repeatable, one host each) and ``--hostname``: the one option table ``analyze`` and
    ``check_run`` share."""
    if bundles == "many":
        parser.add_argument("--bundle", action="append", default=[], metavar="DIR",
                            help="folder of <kind>.txt/.xml files (+ hostname.txt) of one host; repeat for each host")
    else:
        parser.add_argument("--bundle", help="folder of <kind>.txt/.xml files (+ hostname.txt)")
    for opt, kind in FILE_OPTIONS.items():
        parser.add_argument(f"--{opt.replace('_', '-')}", dest=opt, metavar="FILE", help=f"{kind} capture")
    parser.add_argument("--hostname")


def read_host(bundle: str | None, options: dict) -> tuple[str | None, dict[str, str], dict[str, str]]:
    """(hostname or None, {kind: text}, {kind: file path}) of one host, from a bundle folder or the
    per-file options; raises CommandError (exit 2) when unreadable. Empty sections when neither is given."""
    if bundle:
        try:
            name, sections = read_bundle(bundle)
        except BundleError as exc:
            raise CommandError(str(exc), returncode=2) from None
        files = {kind: str(Path(bundle) / f"{kind}.{'xml' if (Path(bundle) / f'{kind}.xml').exists() else 'txt'}")
                 for kind in sections}
        return name, sections, files
    sections, files = {}, {}
    for opt, kind in FILE_OPTIONS.items():
        if options.get(opt):
            files[kind] = options[opt]
            sections[kind] = _read(options[opt])
    return None, sections, files


def analyze_or_exit(command: BaseCommand, sections: dict[str, str], hostname: str | None,
                    files: dict[str, str]) -> dict:
    """The snapshot document of one host; ``FILE:LINE: reason`` on stderr and exit 2 when a capture
    cannot be read."""
    try:
        return analyze_host(sections, hostname).to_dict()
    except ParseError as exc:
        command.stderr.write(f"{files.get(exc.kind, exc.kind)}:{exc.line_no}: {exc.reason}")
        sys.exit(2)
    except UnknownKindError as exc:
        command.stderr.write(str(exc))
        sys.exit(2)


class Command(BaseCommand):
    help = "Analyse one host from a bundle folder or individual capture files."

    def add_arguments(self, parser) -> None:
        add_host_arguments(parser)
        parser.add_argument("--format", choices=["json", "text"], default="json")

    def handle(self, *args, bundle: str | None, hostname: str | None, format: str, **options) -> None:
        name, sections, files = read_host(bundle, options)
        if not sections:
            raise CommandError("give --bundle DIR or at least one capture file (--topo, --ibstat, ...)",
                               returncode=2)
        doc = analyze_or_exit(self, sections, hostname or name, files)
        if format == "json":
            self.stdout.write(json.dumps(doc, indent=2, sort_keys=True))
        else:
            self.stdout.write(render_text(doc))


def _read(file: str) -> str:
    path = Path(file)
    if not path.is_file():
        raise CommandError(f"{file}: no such file", returncode=2)
    return path.read_bytes().decode("utf-8", errors="replace")


def _g(v) -> str:
    return "-" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))


def _table(headers: list[str], rows: list[list]) -> list[str]:
    cells = [[_g(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return out


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _model(s: dict) -> str:
    if s.get("gpu_model"):
        return s["gpu_model"]
    if s.get("gpu_model_assumed"):
        klass = str(s["gpu_model_assumed"]).replace(" (", ", ").rstrip(")")
        return f"model unknown; assumed {klass}"
    return "model unknown"


def _nic_states(s: dict) -> str:
    known = s.get("nic_state_count")
    if known is None:
        known = s["nic_count"]
    if s["nic_count"] and known == 0:
        return "state unknown: send ibstat"
    unknown = s["nic_count"] - known
    return f"{s['active_nic_count']} active" + (f", {unknown} state unknown" if unknown else "")


def _numa(s: dict) -> str:
    numa = s.get("numa_nodes") or s["sockets"]
    text = _n(numa, "CPU NUMA node")
    if s.get("socket_count"):
        return f"{text} on {_n(s['socket_count'], 'socket')}"
    return text + (" (sockets not reported)" if numa > 2 else "")


def _bw(value, assumed: bool) -> str:
    return _g(value) + ("*" if assumed and value is not None else "")


def _any_assumed(hops) -> bool:
    return any(h.get("assumed") for h in hops or [])


def render_text(doc: dict) -> str:
    """Readable tables of a snapshot document: pairs, GPU->NIC, contention, findings, estimate.

    Bandwidths are GB/s per direction; a ``*`` marks a figure that rests on an assumption (listed
    under "Assumptions" with what to send to know). NCCL settings print as ``NAME=VALUE  # reason``
    with the value shell-quoted (``shellsafe.export_line``)."""
    s = doc["summary"]
    how = {"inferred": ", layout inferred from topo -m", "nccl_xml": ", layout from NCCL's topology XML",
           "hwloc_xml": ", layout from hwloc XML", "none": ", no layout source"}.get(doc["graph"].get("mode"), "")
    lines = [f"host {doc['hostname']}: {_n(s['gpu_count'], 'GPU')} ({_model(s)}), "
             f"{_n(s['nic_count'], 'NIC port')} ({_nic_states(s)}), {_numa(s)}{how}", ""]
    starred = False
    if doc["gpu_pairs"]:
        lines.append("GPU pairs (GB/s per direction, expected):")
        rows = []
        for p in doc["gpu_pairs"]:
            a = _any_assumed(p["hops"])
            starred |= a and p["bottleneck_gbs"] is not None
            how = "NVLink not reported" if p.get("nvlink_reported") is False else p["mechanism"].replace("_", " ")
            p2p = "?" if p["p2p"] is None else "yes" if p["p2p"] else "no"  # None: the report cannot tell
            rows.append([p["a"], p["b"], p["path_class"] or "?", how, p2p, _bw(p["bottleneck_gbs"], a), p["reason"]])
        lines += _table(["a", "b", "class", "how", "P2P", "GB/s", "why"], rows)
    if doc.get("gpu_groups"):
        lines += ["", "GPUs to group together (peer-to-peer between every two; best first):"]
        lines += [f"  {g['sentence']}" for g in doc["gpu_groups"]]
    if doc["gpu_nic"]:
        lines += ["", "GPU -> NIC (the NIC NCCL would use; GB/s per direction):"]
        rows = []
        for e in doc["gpu_nic"]:
            a = _any_assumed(e["hops"])
            starred |= a and e["bandwidth_gbs"] is not None
            nic = e["nic"] + (f" ({e['label']})" if e.get("label") and e["label"] != e["nic"] else "")
            rows.append([e["gpu"], nic, e["path_class"], "yes" if e["gdr"] else "no", _bw(e["bandwidth_gbs"], a),
                         e["pxn_via"], e["reason"]])
        lines += _table(["gpu", "nic", "class", "GDR", "GB/s", "PXN via", "why"], rows)
    elif (doc.get("network") or {}).get("message"):
        lines += ["", f"GPU -> NIC: none. {doc['network']['message']}"]
    elif doc["nics"]:
        lines += ["", "GPU -> NIC: no active NIC port reachable from the GPUs."]
    if doc["contention"]:
        lines += ["", "Shared links (GB/s per direction, demand / capacity):"]
        lines += _table(["scenario", "element", "flows", "demand", "capacity", "ratio", "devices"],
                        [[c["scenario"], c["label"], c["flows"], c["demand_gbs"], c["capacity_gbs"],
                          f"{c['ratio']:.2f}x", ", ".join(c["devices"])] for c in doc["contention"]])
    lines += ["", f"Findings ({len(doc['findings'])}):"]
    for f in doc["findings"]:
        devices = f" ({', '.join(f['devices'])})" if f["devices"] else ""
        lines.append(f"  [{f['severity']}] {f['rule']} {f['title']}{devices}")
        lines.append(f"      {f['message']}")
        lines.append(f"      fix: {f['fix']}")
    est = doc["estimate"] or {}
    if est.get("points"):
        lines += ["", f"Expected all-reduce busbw, GB/s (limiting link: {_g(est.get('limiting_link'))}):"]
        lines += _table(["nodes", "busbw GB/s", "algorithm", "ring GB/s", "limit"],
                        [[p["nodes"], p["busbw_gbs"], p.get("algorithm", ""), p.get("ring_busbw_gbs", ""), p["limit"]]
                         for p in est["points"]])
    if doc["nccl_settings"]:
        lines += ["", "NCCL settings:"]
        lines += [f"  {line}" for line in export_block(doc["nccl_settings"], comments=True, export=False)]
    if doc.get("assumptions"):
        lines += ["", "Assumptions" + (" (* in the tables):" if starred else ":")]
        lines += [f"  {a}" for a in doc["assumptions"]]
    if doc["warnings"]:
        lines += ["", "Warnings:"] + [f"  {w}" for w in doc["warnings"]]
    return "\n".join(lines)
