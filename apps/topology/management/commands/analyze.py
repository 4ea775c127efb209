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
}


class Command(BaseCommand):
    help = "Analyse one host from a bundle folder or individual capture files."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--bundle", help="folder of <kind>.txt/.xml files (+ hostname.txt)")
        for opt, kind in FILE_OPTIONS.items():
            parser.add_argument(f"--{opt.replace('_', '-')}", dest=opt, metavar="FILE", help=f"{kind} capture")
        parser.add_argument("--hostname")
        parser.add_argument("--format", choices=["json", "text"], default="json")

    def handle(self, *args, bundle: str | None, hostname: str | None, format: str, **options) -> None:
        files: dict[str, str] = {}
        if bundle:
            try:
                name, sections = read_bundle(bundle)
            except BundleError as exc:
                raise CommandError(str(exc), returncode=2) from None
            hostname = hostname or name
            files = {kind: str(Path(bundle) / f"{kind}.{'xml' if (Path(bundle) / f'{kind}.xml').exists() else 'txt'}")
                     for kind in sections}
        else:
            sections = {}
            for opt, kind in FILE_OPTIONS.items():
                if options.get(opt):
                    files[kind] = options[opt]
                    sections[kind] = _read(options[opt])
            if not sections:
                raise CommandError("give --bundle DIR or at least one capture file (--topo, --ibstat, ...)",
                                   returncode=2)
        try:
            analysis = analyze_host(sections, hostname)
        except ParseError as exc:
            self.stderr.write(f"{files.get(exc.kind, exc.kind)}:{exc.line_no}: {exc.reason}")
            sys.exit(2)
        except UnknownKindError as exc:
            self.stderr.write(str(exc))
            sys.exit(2)
        doc = analysis.to_dict()
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


def render_text(doc: dict) -> str:
    """Readable tables of a snapshot document: pairs, GPU->NIC, contention, findings, estimate."""
    s = doc["summary"]
    lines = [f"host {doc['hostname']}: {s['gpu_count']} GPU ({_g(s['gpu_model'])}), {s['nic_count']} NIC ports "
             f"({s['active_nic_count']} active), {s['sockets']} socket(s)"
             + (", layout inferred from topo -m" if doc["inferred"] else ""), ""]
    lines.append("GPU pairs (GB/s per direction, expected):")
    lines += _table(["a", "b", "class", "mechanism", "p2p", "GB/s", "why"],
                    [[p["a"], p["b"], p["path_class"], p["mechanism"], "yes" if p["p2p"] else "no",
                      p["bottleneck_gbs"], p["reason"]] for p in doc["gpu_pairs"]])
    lines += ["", "GPU -> NIC (the NIC NCCL would use):"]
    lines += _table(["gpu", "nic", "class", "GDR", "GB/s", "PXN via", "why"],
                    [[e["gpu"], e["nic"], e["path_class"], "yes" if e["gdr"] else "no", e["bandwidth_gbs"],
                      e["pxn_via"], e["reason"]] for e in doc["gpu_nic"]])
    if doc["contention"]:
        lines += ["", "Shared links (demand / capacity):"]
        lines += _table(["scenario", "element", "flows", "demand", "capacity", "ratio", "devices"],
                        [[c["scenario"], c["label"], c["flows"], c["demand_gbs"], c["capacity_gbs"],
                          f"{c['ratio']:.2f}x", ", ".join(c["devices"])] for c in doc["contention"]])
    lines += ["", f"Findings ({len(doc['findings'])}):"]
    for f in doc["findings"]:
        lines.append(f"  [{f['severity']}] {f['rule']} {f['title']} ({', '.join(f['devices'])})")
        lines.append(f"      {f['message']}")
        lines.append(f"      fix: {f['fix']}")
    est = doc["estimate"] or {}
    if est.get("points"):
        lines += ["", f"Expected all-reduce busbw (limiting link: {_g(est.get('limiting_link'))}):"]
        lines += _table(["nodes", "busbw GB/s", "limit"],
                        [[p["nodes"], p["busbw_gbs"], p["limit"]] for p in est["points"]])
    if doc["nccl_settings"]:
        lines += ["", "NCCL settings:"]
        lines += [f"  {x['name']}={x['value']}  # {x['reason']}" for x in doc["nccl_settings"]]
    if doc["warnings"]:
        lines += ["", "Warnings:"] + [f"  {w}" for w in doc["warnings"]]
    return "\n".join(lines)
