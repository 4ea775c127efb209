"""python manage.py export FORMAT ...: write a snapshot or a fabric in another tool's format to stdout.

    export nccl_xml|graph_json|graphml (--bundle DIR | --topo F ... | --snapshot ID)
    export slurm_topology (--cluster C | --ibnetdiscover F | --iblinkinfo F) [--form tree|block]
    export k8s_labels (--cluster C | --bundle DIR ... | --snapshot ID ...) [--ibnetdiscover F | --iblinkinfo F]

An operator tool: ``--snapshot`` and ``--cluster`` read the database directly, with no access
check. Errors (unreadable input, unknown snapshot or cluster, input the format cannot express)
exit 2 with a message naming the problem.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.domain.errors import ParseError
from apps.domain.exports import ExportError, graph_json, graphml, k8s_labels, nccl_xml, slurm_topology
from apps.domain.exports.slurm import FORMS
from apps.domain.fabric import build_fabric
from apps.domain.parsers import parse
from apps.topology.management.commands.analyze import FILE_OPTIONS, add_host_arguments, analyze_or_exit, read_host

FABRIC_OPTIONS = {"ibnetdiscover": "ibnetdiscover", "iblinkinfo": "iblinkinfo"}  # option -> fabric kind


class Command(BaseCommand):
    help = ("Export a host (NCCL topology XML, graph JSON, GraphML), a fabric (Slurm topology.conf) or a "
            "cluster's nodes (Kubernetes labels) to stdout.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("format", choices=sorted(EXPORTS), metavar="FORMAT",
                            help=f"one of: {', '.join(sorted(EXPORTS))}")
        add_host_arguments(parser, bundles="many")
        parser.add_argument("--snapshot", action="append", default=[], type=int, metavar="ID",
                            help="a stored snapshot (repeat for k8s_labels)")
        parser.add_argument("--cluster", metavar="C", help="a cluster: its fabric, or its hosts' newest snapshots")
        for opt in FABRIC_OPTIONS:
            parser.add_argument(f"--{opt}", metavar="FILE", help=f"{opt} capture of the fabric")
        parser.add_argument("--form", choices=FORMS, default="tree", help="slurm_topology: tree or block plugin")

    def handle(self, *args, format: str, **options) -> None:
        try:
            text = EXPORTS[format](self, options)
        except ExportError as exc:
            raise CommandError(f"{format}: {exc}", returncode=2) from None
        self.stdout.write(text, ending="")

    # -- inputs ----------------------------------------------------------------------------
    def host_doc(self, options: dict) -> dict:
        """The one host an export of a host reads: a snapshot, a bundle or capture files."""
        docs = self.host_docs(options)
        if len(docs) != 1:
            raise CommandError(f"give one host (one --bundle or --snapshot), not {len(docs)}", returncode=2)
        return docs[0]

    def host_docs(self, options: dict) -> list[dict]:
        """Snapshot documents from ``--cluster`` (each host's newest), ``--snapshot`` and
        ``--bundle`` (repeatable), or one host's capture files."""
        bundles, snapshots, cluster = options["bundle"], options["snapshot"], options.get("cluster")
        files = [opt for opt in FILE_OPTIONS if options.get(opt)]
        if sum(map(bool, (bundles or files, snapshots, cluster))) != 1 or (bundles and files):
            raise CommandError("give the host(s) one way: --bundle DIR, capture files (--topo F ...), --snapshot ID "
                               "or --cluster C", returncode=2)
        if cluster:
            return _cluster_docs(cluster)
        if snapshots:
            return [_snapshot_doc(pk) for pk in snapshots]
        if files:
            return [self._analyze(None, options)]
        return [self._analyze(b, options) for b in bundles]

    def _analyze(self, bundle: str | None, options: dict) -> dict:
        name, sections, files = read_host(bundle, options)
        if not sections:
            raise CommandError(f"{bundle}: no capture files in the bundle", returncode=2)
        return analyze_or_exit(self, sections, options.get("hostname") or name, files)

    def fabric(self, options: dict, *, required: bool = True):
        """The fabric graph from ``--ibnetdiscover``/``--iblinkinfo``, else the cluster's (``--cluster``)."""
        given = [(opt, kind) for opt, kind in FABRIC_OPTIONS.items() if options.get(opt)]
        if len(given) > 1:
            raise CommandError("give one fabric capture (--ibnetdiscover or --iblinkinfo)", returncode=2)
        if given:
            opt, kind = given[0]
            return build_fabric(_parse_file(options[opt], kind))
        if options.get("cluster"):
            try:
                return _cluster_fabric(options["cluster"])
            except CommandError as exc:
                if required:
                    raise
                self.stderr.write(f"{exc}; no topoweb.io/leaf labels")
                return None
        if required:
            raise CommandError("give the fabric: --ibnetdiscover FILE, --iblinkinfo FILE or --cluster C", returncode=2)
        return None


# One adapter per format: FORMAT -> (command, options) -> text.
EXPORTS: dict[str, Callable[[Command, dict], str]] = {
    "nccl_xml": lambda cmd, o: nccl_xml(cmd.host_doc(o)),
    "graph_json": lambda cmd, o: graph_json(cmd.host_doc(o)),
    "graphml": lambda cmd, o: graphml(cmd.host_doc(o)),
    "slurm_topology": lambda cmd, o: slurm_topology(cmd.fabric(o), form=o["form"]),
    "k8s_labels": lambda cmd, o: k8s_labels(cmd.host_docs(o), cmd.fabric(o, required=False)),
}


def _parse_file(path: str, kind: str):
    file = Path(path)
    if not file.is_file():
        raise CommandError(f"{path}: no such file", returncode=2)
    try:
        return parse(kind, file.read_bytes().decode("utf-8", errors="replace"))
    except ParseError as exc:
        raise CommandError(f"{path}:{exc.line_no}: {exc.reason}", returncode=2) from None


# -- database reads (an operator tool: no access check) ------------------------------------------

def _snapshot_doc(pk: int) -> dict:
    from apps.ingest import selectors
    from apps.ingest.models import Snapshot

    try:
        return selectors.get_snapshot_doc(pk)
    except Snapshot.DoesNotExist:
        raise CommandError(f"no snapshot {pk}", returncode=2) from None


def _cluster(name: str):
    from apps.ingest import selectors
    from apps.ingest.models import Cluster

    try:
        return selectors.get_cluster(name)
    except Cluster.DoesNotExist:
        raise CommandError(f"no cluster named {name!r}", returncode=2) from None


def _cluster_docs(name: str) -> list[dict]:
    from apps.ingest import selectors

    snapshots = selectors.latest_snapshots(_cluster(name))
    if not snapshots:
        raise CommandError(f"cluster {name} has no snapshot yet", returncode=2)
    return [selectors.get_snapshot_doc(s.pk) for s in snapshots]


def _cluster_fabric(name: str):
    """The graph of the cluster's fabric in force (``fabrics.cluster_fabric``: its newest readable
    ``ibnetdiscover``/``iblinkinfo``), shared and read-only; a CommandError when it has none."""
    from apps.ingest import fabrics

    cluster = _cluster(name)
    cf = fabrics.cluster_fabric(cluster)
    if cf is None:
        raise CommandError(f"cluster {name} has no readable fabric discovery stored (send one: agent --fabric, or "
                           "POST /api/v1/fabric); or use --ibnetdiscover FILE", returncode=2)
    return cf.graph
