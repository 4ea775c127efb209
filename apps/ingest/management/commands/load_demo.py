"""python manage.py load_demo: load the bundled demo cluster (idempotent; ``make run`` calls it).

The hosts, their descriptions and their snapshots are listed in ``apps/ingest/demo/demo.json``;
the captures under ``apps/ingest/demo/captures/`` are byte-for-byte copies of public real
captures (``SOURCES.tsv`` names each one's origin). Loading again adds nothing: every report is
recognised as already stored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction

from apps.ingest import reports, services
from apps.ingest.models import Cluster, Host, Upload

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"


def demo_reports(demo_dir: Path = DEMO_DIR) -> tuple[dict, list[tuple[dict, dict]]]:
    """(cluster spec, [(host spec, report), ...]) from demo.json, in load order."""
    spec = json.loads((demo_dir / "demo.json").read_text(encoding="utf-8"))
    out = []
    for host in spec["hosts"]:
        for snap in host["snapshots"]:
            sections = {kind: (demo_dir / rel).read_bytes().decode("utf-8") for kind, rel in snap["sections"].items()}
            report = {"schema": reports.REPORT_SCHEMA, "hostname": host["hostname"],
                      "collected_at": snap["collected_at"], "agent_version": "demo",
                      "meta": {"source": "topoweb demo", "files": snap["sections"]},
                      "sections": sections, "unavailable": {}}
            out.append((host, report))
    return spec["cluster"], out


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
        if failed:
            sys.exit(1)
