"""python manage.py load_demo: load the bundled demo cluster (idempotent; ``make run`` calls it).

The real hosts, their descriptions and their snapshots are listed in ``apps/ingest/demo/demo.json``;
the captures under ``apps/ingest/demo/captures/`` are byte-for-byte copies of public real
captures (``SOURCES.tsv`` names each one's origin). After them comes the generated fleet of
``apps/ingest/demo/fleet.py``: SYNTHETIC hosts on three platforms, built on the layouts of real
captures, with its odd ones out and a NIC move (two snapshots). Loading again adds nothing: every
report is recognised as already stored (the fleet is generated the same way every time). The
demo's runs (``runs`` in demo.json: real nccl-tests and NCCL log captures) are loaded after the
reports, each checked against the demo hosts whose hardware matches; their descriptions say which
pairings are synthetic. Last, the fleet's SYNTHETIC InfiniBand fabric
(``apps/ingest/demo/fleet_fabric.py``) is stored as an ``ibnetdiscover`` discovery.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction

from apps.ingest import fabrics, reports, runs, services
from apps.ingest.demo import fleet, fleet_fabric
from apps.ingest.models import Cluster, Fabric, Host, Upload

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"


def demo_reports(demo_dir: Path = DEMO_DIR) -> tuple[dict, list[tuple[dict, dict]]]:
    """(cluster spec, [(host spec, report), ...]) from demo.json, in load order."""
    spec = json.loads((demo_dir / "demo.json").read_text(encoding="utf-8"))
    out = []
    for host in spec["hosts"]:
        for snap in host["snapshots"]:
            sections = {kind: (demo_dir / rel).read_bytes().decode("utf-8") for kind, rel in snap["sections"].items()}
            out.append((host, _report(host["hostname"], snap["collected_at"], sections,
                                      {"source": "topoweb demo", "files": snap["sections"]})))
    for generated in fleet.fleet_hosts():
        host = {"hostname": generated.hostname, "description": generated.description}
        out += [(host, _report(generated.hostname, snap.collected_at, snap.sections,
                               {"source": "topoweb demo fleet (SYNTHETIC)", "platform": generated.platform}))
                for snap in generated.snapshots]
    return spec["cluster"], out


def _report(hostname: str, collected_at: str, sections: dict[str, str], meta: dict) -> dict:
    return {"schema": reports.REPORT_SCHEMA, "hostname": hostname, "collected_at": collected_at,
            "agent_version": "demo", "meta": meta, "sections": dict(sections), "unavailable": {}}


def demo_runs(demo_dir: Path = DEMO_DIR) -> list[tuple[dict, str]]:
    """[(run spec, text), ...] of demo.json's ``runs``: a real capture, the demo hosts it is checked
    against (``hosts``: {name in the run: demo host}), when, and a description saying what is real."""
    spec = json.loads((demo_dir / "demo.json").read_text(encoding="utf-8"))
    return [(r, (demo_dir / r["file"]).read_bytes().decode("utf-8")) for r in spec.get("runs") or []]


class Command(BaseCommand):
    help = "Load the bundled demo cluster built from real captures (safe to run again)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", default=None, help="cluster name (default: the demo's, 'demo')")
        parser.add_argument("--members-only", action="store_true",
                            help="do not open the demo to every signed-in user (default: open, as "
                                 "TOPOWEB_DEMO_OPEN_TO_ALL says); grant roles with manage.py grant")

    def handle(self, *args, cluster: str | None, members_only: bool, **options) -> None:
        cluster_spec, reports = demo_reports()
        name = cluster or cluster_spec["name"]
        with transaction.atomic():
            target, made = Cluster.objects.get_or_create(name=name,
                                                         defaults={"description": cluster_spec["description"]})
            if made:  # a demo cluster made earlier keeps the openness its admins chose
                target.open_to_all_users = settings.DEMO_OPEN_TO_ALL and not members_only
                target.save(update_fields=["open_to_all_users"])
        created = 0
        for host_spec, report in reports:
            upload, new = services.submit_report(cluster=target, report=report, via=Upload.Via.IMPORT,
                                                 source_name=f"demo/{host_spec['hostname']}")
            created += new
            Host.objects.filter(pk=upload.host_id).update(description=host_spec["description"])
        failed = Upload.objects.filter(cluster=target, status=Upload.Status.FAILED).select_related("host")
        self.stdout.write(f"demo cluster {name!r}: {'created, ' if made else ''}{created} new reports, "
                          f"{len(reports) - created} already loaded; "
                          f"{Host.objects.filter(cluster=target).count()} hosts")
        for u in failed:
            self.stderr.write(f"  demo upload {u.pk} ({u.host.hostname}) failed: {u.error}")
        made_runs = self._load_runs(target)
        self.stdout.write(f"demo runs: {made_runs} new, {len(demo_runs()) - made_runs} already loaded")
        fabric, new_fabric = self._load_fabric(target)
        self.stdout.write(f"demo fabric: {'new' if new_fabric else 'already loaded'} ({fabric.kind}, "
                          f"{(fabric.summary or {}).get('host_adapters', 0)} host adapters)")
        if fabric.status != Fabric.Status.OK:
            self.stderr.write(f"  demo fabric {fabric.pk} failed: {fabric.error}")
        if failed or fabric.status != Fabric.Status.OK:
            sys.exit(1)

    def _load_runs(self, target: Cluster) -> int:
        """The demo's measurements, each checked against the demo host its hardware matches."""
        made = 0
        for spec, text in demo_runs():
            _run, new = runs.submit_run(cluster=target, text=text, via=Upload.Via.IMPORT, hosts=spec["hosts"],
                                        collected_at=spec["collected_at"], description=spec["description"],
                                        source_name="demo/" + spec["file"].rsplit("/", 1)[-1])
            made += new
        return made

    def _load_fabric(self, target: Cluster) -> tuple[Fabric, bool]:
        """The fleet's SYNTHETIC InfiniBand fabric, one ``ibnetdiscover`` of its H100 pod."""
        return fabrics.submit_fabric(cluster=target, text=fleet_fabric.fabric_text(fleet.fleet_hosts()),
                                     via=Upload.Via.IMPORT, kind="ibnetdiscover",
                                     collected_at=fleet_fabric.COLLECTED_AT, source_name=fleet_fabric.SOURCE_NAME)
