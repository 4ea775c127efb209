"""The fabric of a cluster: fabric outputs stored verbatim and versioned, read, and joined to the hosts.

Every write of the ``Fabric`` table goes through this module; the API, the paste page, the import
and the agent's uploads call it. Signatures (keyword-only after the ``*``):

``submit_fabric(*, cluster, text, via, kind=None, host=None, collected_at=None, user=None, token=None,
               source_name="") -> (Fabric, created)``
    Stores the text exactly as sent and reads it (kind detected among the fabric kinds when not
    given). ``created`` is False when the same output is already stored in that cluster (the
    stored row is returned): same kind, same host, same text (``content_hash``). Text that cannot
    be read is still stored, ``failed`` with ``error = {"line_no", "line", "reason"}``. Raises
    ``ReportRejected`` (``.status``, ``.code``, ``.message``) for what cannot be stored at all:
    an empty text, NUL characters, over ``TOPOWEB_MAX_FABRIC_BYTES`` (413), a kind that is not a
    fabric kind, a per-host kind without ``host``, a malformed ``host`` or ``collected_at``; then
    nothing is written. ``host`` (a host name) is the host a per-host output is about
    (``lldpctl_json``, ``lldpcli_neighbors``, ``ibdev2netdev``); the host is matched by name (exact,
    else by short name, case-insensitively) and created when the cluster has none of that name.
    Discoveries describe the whole fabric: their ``host`` is ignored. A ``collected_at`` more than
    ``TOPOWEB_CLOCK_SKEW_SECONDS`` ahead of the server's clock is not used (a warning says so).
``latest_fabric(cluster, at=None) -> Fabric | None``
    The fabric in force: the newest readable discovery (``ibnetdiscover``/``iblinkinfo``, the kinds
    with links) taken at or before ``at`` (its ``collected_at``, else its arrival); the newest of
    all when ``at`` is None. ``raw`` and ``document`` are deferred.
``fabric_versions(cluster, *, kinds=None) -> QuerySet[Fabric]``
    Every fabric upload of the cluster (of ``kinds`` only, when given), newest first by when it was
    taken, ``raw`` and ``document`` deferred, annotated ``taken``.
``previous_fabric(fabric) -> Fabric | None``  the readable discovery in force just before ``fabric``.
``fabric_summary(fabric) -> dict``  an upload as the API lists it (no text, no parser JSON).
``fabric_page_path(cluster_name) -> str``  ``/c/<cluster>/fabric/``, the cluster's fabric page.
``fabric_graph(fabric) -> nx.Graph``
    ``apps.domain.fabric.build_fabric`` of a readable discovery, built once per Fabric id and kept
    in an in-process LRU (``GRAPH_CACHE_SIZE`` graphs): callers share it and must not change it.
``cluster_fabric(cluster, at=None, *, fabric=None) -> ClusterFabric | None``
    The fabric in force at ``at`` (or ``fabric``, a discovery of the cluster) with the cluster's
    hosts attached: ``apps.domain.fabric.attach_hosts`` fed with the port and node GUIDs of each
    host's snapshot in force at ``at`` (its report's ``ibstat``, ``sysfs_ib`` and ``ibv_devinfo``
    sections, through ``fabric.host_ports_from_ib``: exact joins), the hosts' names (node
    description joins, marked ``match: "name"``) and the hosts' latest per-host LLDP uploads.
    None when the cluster has no readable discovery then.
``fabric_error_text(fabric) -> str``  ``FILE:LINE: reason`` of a failed upload.
``fabric_view(cf) -> FabricView``
    ``apps.domain.fabric_paths.FabricView.build(cf.graph, cf.attachments)``, built once per Fabric
    id and set of attached hosts (their GUID rows and LLDP) and kept in an in-process LRU
    (``VIEW_CACHE_SIZE`` views): the fabric page, the path API and pages, the job contention and the
    Slurm export share it (its route summaries are kept on it).
``path_fabric(cluster_a, cluster_b, at=None) -> (ClusterFabric | None, reason | None)``
    The fabric a cross-host path between hosts of these clusters goes through: the discovery of
    their cluster in force at ``at`` (the later of the two snapshots), with the hosts in force then;
    None and the reason when the hosts are in two clusters or the cluster has no readable discovery
    then (the path then takes the rail model, labelled assumed).
``job_on_fabric(cluster, spec, algorithm="ring") -> dict | None``
    A job's hosts (``spec``: names, comma or space separated, or globs such as ``h100-n0*``;
    ``apps.domain.fabric_job_report.job_hosts``) on the fabric in force: ``{"cluster",
    "fabric_id", "hosts", "unmatched", "algorithm", "contention", "findings", "leaf_rails",
    "verdict"}`` (``fabric_job_report.job_report``, with each host's compute NICs from its snapshot
    in force). None when the cluster has no readable discovery; ``ValueError`` (the message names
    the field) when ``spec`` names no host of the cluster, names more than ``MAX_JOB_HOSTS`` or
    ``algorithm`` is not ring or tree.

:class:`ClusterFabric` (frozen): ``fabric`` (the Fabric row), ``graph`` (shared, read-only),
``attachments`` (``attach_hosts``'s ``{"hosts": {host: [row]}, "unmatched": [port rows no CA
has]}`` plus ``"lldp": {host: [{"interface", "nic", "port", "switch", "switch_port",
"chassis_id", "mgmt_ips"}]}``: what ``apps.domain.fabric_paths.FabricView.build`` takes),
``host_of_ca`` ``{CA node id: host name}``, ``unmatched_hosts`` (``[{"host", "reason",
"port_guids"}]``: hosts of the cluster that no CA of the discovery matches, by GUID or by name)
and ``unclaimed`` (``[{"ca", "name", "guid", "described_host", "leaf_name", "leaf_port"}]``:
host adapters of the discovery that no host of the cluster claims).

Reading is done in the request (or the import), as runs are: the 582-adapter SuperPOD
``ibnetdiscover`` (300 KB) is detected in ~63 ms, parses in ~68 ms and builds in ~40 ms (the whole
submit, stored, 0.5-0.7 s on SQLite; docs/ingestion.md, "The fabric"), and the API must answer an
unreadable text with a 400 naming the line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any
from urllib.parse import quote

import networkx as nx
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from apps.domain import fabric as fabric_graphs
from apps.domain.errors import ParseError, UnknownKindError
from apps.domain.fabric_job_report import MAX_JOB_HOSTS, job_hosts, job_report
from apps.domain.fabric_jobs import ALGORITHMS
from apps.domain.fabric_paths import FabricView
from apps.domain.parsers import ALL_KINDS, detect_kind, kinds_of, to_jsonable
from apps.ingest.models import AgentToken, Cluster, Fabric, Host, Snapshot, Upload
from apps.ingest.reports import HOSTNAME_RE, ReportRejected, check_posted_text, parse_collected_at

log = logging.getLogger(__name__)

FABRIC_KINDS: tuple[str, ...] = tuple(kinds_of("fabric"))
DISCOVERY_KINDS = ("ibnetdiscover", "iblinkinfo")  # the whole fabric with its links: may be in force
NODE_LIST_KINDS = ("ibswitches", "ibhosts", "ibnodes")  # the whole fabric's nodes, no links
GRAPH_KINDS = DISCOVERY_KINDS + NODE_LIST_KINDS  # read into a graph; summary kept
LLDP_KINDS = ("lldpctl_json", "lldpcli_neighbors")
HOST_KINDS = LLDP_KINDS + ("ibdev2netdev",)  # what one host's NICs see: stored with the host
assert set(GRAPH_KINDS + HOST_KINDS) == set(FABRIC_KINDS), "every fabric kind is a discovery or a per-host kind"
IB_SECTIONS = ("ibstat", "sysfs_ib", "ibv_devinfo")  # report sections that give port and node GUIDs

# The parser's JSON is kept with the upload up to this size; a larger one (a 16,000-adapter
# discovery is ~30 MB) is read again from the raw text when its graph is built.
DOCUMENT_KEEP_BYTES = 4 << 20
GRAPH_CACHE_SIZE = 8  # fabric graphs kept in memory per process (a 2,000-switch graph is ~100 MB)
HOST_PORTS_CACHE_SIZE = 8192  # snapshots whose GUID rows are kept (a few hundred bytes each)
ATTACH_CACHE_SIZE = 16  # host attachments kept, per (fabric, snapshots in force, LLDP uploads)
VIEW_CACHE_SIZE = 8  # FabricViews kept, per (fabric, hosts attached); each holds its route summaries


class _Lru:
    """A small thread-safe least-recently-used map (``get`` -> value or None; ``put``)."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_GRAPHS = _Lru(GRAPH_CACHE_SIZE)
_HOST_PORTS = _Lru(HOST_PORTS_CACHE_SIZE)
_ATTACHED = _Lru(ATTACH_CACHE_SIZE)
_VIEWS = _Lru(VIEW_CACHE_SIZE)


def clear_caches() -> None:
    """Forget every cached graph and join (tests; a process never needs it: rows are never changed)."""
    for cache in (_GRAPHS, _HOST_PORTS, _ATTACHED, _VIEWS):
        cache.clear()


# --------------------------------------------------------------------------------------------- submit


def _check_text(text: Any) -> str:
    return check_posted_text(text, what="the fabric output", limit=settings.MAX_FABRIC_BYTES,
                             setting="TOPOWEB_MAX_FABRIC_BYTES",
                             empty_hint="send the output of ibnetdiscover, iblinkinfo, ibswitches/ibhosts/ibnodes, "
                                        "lldpctl -f json, lldpcli show neighbors or ibdev2netdev")


def _check_kind(kind: Any) -> str | None:
    if kind in (None, "", "auto"):
        return None
    if kind not in FABRIC_KINDS:
        raise ReportRejected(f"kind: {kind!r} is not a fabric kind; fabric kinds: {', '.join(FABRIC_KINDS)} (or leave "
                             "it out to detect it)", code="unknown_kind", field="kind", kind=str(kind)[:64],
                             known_kinds=list(FABRIC_KINDS))
    return kind


def _check_host(host: Any) -> str | None:
    if host in (None, ""):
        return None
    if not isinstance(host, str) or not HOSTNAME_RE.match(host.strip()):
        raise ReportRejected(f"host: {str(host)[:80]!r} is not a host name (letters, digits, '.', '_', '-'; at most "
                             "253)", code="invalid_field", field="host")
    return host.strip()


def _taken_at(collected_at: Any, now: datetime) -> tuple[datetime | None, list[str]]:
    """The ``collected_at`` to store and the warnings about it (one too far ahead, or outside the years
    2000-9000, is not used); a 400 naming ``collected_at`` when it is no ISO 8601 time at all."""
    if collected_at in (None, ""):
        return None, []
    if isinstance(collected_at, datetime):
        moment = collected_at if timezone.is_aware(collected_at) else collected_at.replace(tzinfo=dt_timezone.utc)
    else:
        moment = parse_collected_at(collected_at)
    if moment is not None and moment > now + timedelta(seconds=settings.CLOCK_SKEW_SECONDS):
        return None, [f"collected_at {moment:%Y-%m-%dT%H:%M:%SZ} is more than {settings.CLOCK_SKEW_SECONDS} s ahead "
                      "of the server's clock; the upload is dated by its arrival instead (check the clock)"]
    if moment is None:
        return None, [f"collected_at {str(collected_at)[:40]!r} is outside the years 2000-9000; the upload is dated by "
                      "its arrival instead"]
    return moment, []


def content_hash(kind: str, host: str | None, text: str) -> str:
    """sha256 of kind, host name and text: the same output of the same host sent again is a duplicate
    (two hosts' identical ``ibdev2netdev`` outputs are not)."""
    return hashlib.sha256("\x00".join((kind, host or "", text)).encode("utf-8")).hexdigest()


def _detect(text: str, kind: str | None) -> tuple[str | None, dict | None]:
    """(kind, error): the kind given, else the fabric kind the text reads as."""
    if kind is not None:
        return kind, None
    try:
        return detect_kind(text, family="fabric"), None
    except UnknownKindError as exc:
        return None, {"line_no": 0, "line": "", "reason": str(exc)}


@dataclass
class _Reading:
    document: dict | None = None
    summary: dict | None = None
    warnings: list[str] = field(default_factory=list)
    error: dict | None = None
    graph: nx.Graph | None = None


def _read(text: str, kind: str) -> _Reading:
    """Parse ``text`` as ``kind``; for the graph kinds, build the graph and its summary. Never raises:
    a parser bug fails the upload (the raw text is kept), it does not fail the request."""
    try:
        result = ALL_KINDS[kind].parse(text)
        document = to_jsonable(result)
        warnings = list(document.get("warnings") or [])
        if kind not in GRAPH_KINDS:
            return _Reading(document=document, warnings=warnings)
        G = fabric_graphs.build_fabric(result)
        return _Reading(document=document, summary=fabric_graphs.summary(G), warnings=list(G.graph["warnings"]),
                        graph=G)
    except ParseError as exc:
        return _Reading(error={"line_no": exc.line_no, "line": exc.line, "reason": exc.reason})
    except Exception as exc:  # a parser bug must fail this upload, not the request; the text is kept
        log.exception("reading a %s fabric output failed", kind)
        return _Reading(error={"line_no": 0, "line": "", "reason": f"internal error while reading it: "
                                                                    f"{type(exc).__name__}: {exc}"})


def _short(name: str) -> str:
    return name.split(".")[0].lower()


def _find_host(cluster: Cluster, name: str) -> Host | None:
    """The cluster's host of that name: exact, else the same short name, case-insensitively."""
    hosts = list(Host.objects.filter(cluster=cluster).filter(
        Q(hostname=name) | Q(hostname__iexact=_short(name)) | Q(hostname__istartswith=_short(name) + ".")))
    return next((h for h in hosts if h.hostname == name), None) or next(
        (h for h in hosts if _short(h.hostname) == _short(name)), None)


def _owner(cluster: Cluster, kind: str | None, hostname: str | None) -> tuple[Host | None, str | None]:
    """(the known host, the host name) a per-host output is filed under; (None, None) for the others
    (a discovery describes the whole fabric, not the host it ran on). A per-host kind needs a host."""
    if kind not in HOST_KINDS:
        return None, None
    if hostname is None:
        raise ReportRejected(f"host: {ALL_KINDS[kind].command} shows one host's NICs; name that host",
                             code="invalid_field", field="host")
    known = _find_host(cluster, hostname)
    return known, known.hostname if known is not None else hostname


def _kept(document: dict | None) -> dict | None:
    """The parser's JSON as stored: None past ``DOCUMENT_KEEP_BYTES`` (read again from the raw text)."""
    if document is not None and len(json.dumps(document)) > DOCUMENT_KEEP_BYTES:
        return None
    return document


def submit_fabric(*, cluster: Cluster, text: Any, via: str, kind: str | None = None, host: Any = None,
                  collected_at: Any = None, user=None, token: AgentToken | None = None,
                  source_name: str = "") -> tuple[Fabric, bool]:
    """Store one fabric output verbatim and read it; see the module docstring."""
    if via not in Upload.Via.values:
        raise ValueError(f"via must be one of {Upload.Via.values}, got {via!r}")
    if token is not None and token.cluster_id != cluster.pk:
        raise PermissionError(f"token {token.prefix} belongs to another cluster")
    text = _check_text(text)
    kind = _check_kind(kind)
    hostname = _check_host(host)
    now = timezone.now()
    moment, notes = _taken_at(collected_at, now)
    kind_read, error = _detect(text, kind)
    known, hostname = _owner(cluster, kind_read, hostname)
    digest = content_hash(kind_read or "", hostname, text)
    existing = Fabric.objects.filter(cluster=cluster, content_hash=digest).defer("raw", "document").first()
    if existing is not None:
        return existing, False
    # Read outside the transaction: a 16,000-adapter discovery must not hold the write lock.
    reading = _read(text, kind_read) if error is None else _Reading(error=error)
    row = Fabric(cluster=cluster, kind=kind_read or "", raw=text, size_bytes=len(text.encode("utf-8")),
                 content_hash=digest, via=via, token=token, user=user, source_name=source_name[:500],
                 collected_at=moment, status=Fabric.Status.FAILED if reading.error else Fabric.Status.OK,
                 error=reading.error, document=_kept(reading.document), summary=reading.summary,
                 warnings=notes + reading.warnings)
    try:
        with transaction.atomic():
            if hostname is not None:
                row.host = known or Host.objects.get_or_create(cluster=cluster, hostname=hostname,
                                                               defaults={"last_seen_at": now})[0]
            row.save()
    except IntegrityError:  # the same output raced in from another request
        return Fabric.objects.get(cluster=cluster, content_hash=digest), False
    if reading.graph is not None:
        _GRAPHS.put((row.pk, row.content_hash), reading.graph)
    return row, True


def fabric_error_text(fabric: Fabric) -> str:
    """``FILE:LINE: reason`` of a fabric upload that could not be read."""
    e = fabric.error or {}
    return f"{fabric.source_name or 'text'}:{e.get('line_no', 0)}: {e.get('reason', 'unreadable')}"


# --------------------------------------------------------------------------------------------- versions


def _taken(rows: QuerySet[Fabric]) -> QuerySet[Fabric]:
    return rows.annotate(taken=Coalesce("collected_at", "received_at"))


def fabric_versions(cluster: Cluster, *, kinds: Iterable[str] | None = None) -> QuerySet[Fabric]:
    """Every fabric upload of ``cluster`` (of ``kinds``), newest first by when it was taken."""
    rows = Fabric.objects.filter(cluster=cluster).select_related("host", "cluster").defer("raw", "document")
    if kinds is not None:
        rows = rows.filter(kind__in=list(kinds))
    return _taken(rows).order_by("-taken", "-id")


def latest_fabric(cluster: Cluster, at: datetime | None = None) -> Fabric | None:
    """The readable discovery in force at ``at`` (the newest taken at or before it); the newest when None."""
    rows = _taken(Fabric.objects.filter(cluster=cluster, status=Fabric.Status.OK, kind__in=DISCOVERY_KINDS))
    if at is not None:
        rows = rows.filter(taken__lte=at)
    return rows.select_related("cluster").defer("raw", "document").order_by("-taken", "-id").first()


def previous_fabric(fabric: Fabric) -> Fabric | None:
    """The readable discovery in force just before ``fabric`` was taken (None for the first one)."""
    taken = fabric.taken_at
    rows = _taken(Fabric.objects.filter(cluster_id=fabric.cluster_id, status=Fabric.Status.OK,
                                        kind__in=DISCOVERY_KINDS).exclude(pk=fabric.pk))
    rows = rows.filter(Q(taken__lt=taken) | Q(taken=taken, id__lt=fabric.pk))
    return rows.select_related("cluster").defer("raw", "document").order_by("-taken", "-id").first()


def fabric_summary(fabric: Fabric) -> dict:
    """A fabric upload as the API lists it (no text, no parser JSON)."""
    return {"fabric_id": fabric.pk, "cluster": fabric.cluster.name, "kind": fabric.kind or None,
            "status": fabric.status, "host": fabric.host.hostname if fabric.host_id else None,
            "discovery": fabric.kind in DISCOVERY_KINDS, "via": fabric.via, "source_name": fabric.source_name,
            "size_bytes": fabric.size_bytes, "collected_at": fabric.collected_at, "received_at": fabric.received_at,
            "taken_at": fabric.taken_at, "summary": fabric.summary, "warnings": fabric.warnings,
            "error": fabric.error}


def fabric_page_path(cluster_name: str) -> str:
    """The cluster's fabric page, ``/c/<cluster>/fabric/`` (the explorer's URL ``fabric``)."""
    for name in ("explorer:fabric", "fabric"):
        try:
            return reverse(name, args=[cluster_name])
        except NoReverseMatch:
            continue
    return f"/c/{quote(cluster_name, safe='')}/fabric/"


def fabric_graph(fabric: Fabric) -> nx.Graph:
    """The graph of a readable discovery, built once per Fabric id (shared: do not change it)."""
    if fabric.status != Fabric.Status.OK or fabric.kind not in GRAPH_KINDS:
        raise ValueError(f"fabric {fabric.pk} is {fabric.status} {fabric.kind or 'unreadable'}: no graph")
    key = (fabric.pk, fabric.content_hash)
    G = _GRAPHS.get(key)
    if G is None:
        document = Fabric.objects.values_list("document", flat=True).get(pk=fabric.pk)
        if document is None:  # too large to keep: read the raw text again
            raw = Fabric.objects.values_list("raw", flat=True).get(pk=fabric.pk)
            document = ALL_KINDS[fabric.kind].parse(raw)
        G = fabric_graphs.build_fabric(document)
        _GRAPHS.put(key, G)
    return G


# --------------------------------------------------------------------------------------------- hosts


@dataclass(frozen=True)
class ClusterFabric:
    """The fabric in force with the cluster's hosts attached (see the module docstring); shared, read-only."""

    fabric: Fabric
    graph: nx.Graph
    attachments: dict
    host_of_ca: dict[str, str]
    unmatched_hosts: list[dict] = field(default_factory=list)
    unclaimed: list[dict] = field(default_factory=list)
    join_key: tuple | None = None  # (fabric id, content hash, hosts, snapshots, LLDP uploads): fabric_view's key
    host_ports: dict = field(default_factory=dict)  # {hostname: GUID rows} (fabric.host_ports_from_ib) the join read


def _snapshots_in_force(cluster: Cluster, at: datetime | None) -> list[tuple[str, int, int, str]]:
    """``[(hostname, snapshot id, upload id, upload content hash)]`` of each host's snapshot in force at
    ``at`` (newest when None)."""
    rows = Snapshot.objects.filter(host=OuterRef("pk"))
    if at is not None:
        rows = rows.filter(collected_at__lte=at)
    newest = rows.order_by("-collected_at", "-id").values("id")[:1]
    ids = dict(Host.objects.filter(cluster=cluster).annotate(snap=Subquery(newest)).exclude(snap__isnull=True)
               .values_list("snap", "hostname"))
    return sorted((ids[pk], pk, upload, digest) for pk, upload, digest in
                  Snapshot.objects.filter(pk__in=list(ids)).values_list("pk", "upload_id", "upload__content_hash"))


def _ports_of_report(raw: str, hostname: str) -> list[dict]:
    """The GUID rows (``fabric.host_ports_from_ib``) of one stored report's InfiniBand sections."""
    try:
        sections = json.loads(raw).get("sections") or {}
    except (ValueError, AttributeError):
        return []
    rows, seen = [], set()
    for kind in IB_SECTIONS:
        text = sections.get(kind)
        if not isinstance(text, str):
            continue
        try:
            result = ALL_KINDS[kind].parse(text)
        except ParseError:
            continue  # the snapshot was built without it too (or the rule changed since)
        for row in fabric_graphs.host_ports_from_ib({hostname: result})[hostname]:
            key = (row["nic"], row["port"], row["port_guid"], row["node_guid"])
            if key not in seen:
                seen.add(key)
                rows.append(row)
    return rows


def _host_ports(snapshots: list[tuple[str, int, int, str]]) -> dict[str, list[dict]]:
    """``{hostname: GUID rows}`` of every host with a snapshot in force; reports read once per snapshot
    (cached by report content, as every cache here is: an id alone could name another row in a test
    database that reuses ids)."""
    out: dict[str, list[dict]] = {}
    missing: dict[int, tuple[str, tuple]] = {}
    for hostname, _snap, upload, digest in snapshots:
        key = (hostname, digest)
        cached = _HOST_PORTS.get(key)
        if cached is None:
            missing[upload] = (hostname, key)
        else:
            out[hostname] = cached
    if missing:
        for upload, raw in Upload.objects.filter(pk__in=list(missing)).values_list("pk", "raw").iterator(chunk_size=64):
            hostname, key = missing[upload]
            out[hostname] = _ports_of_report(raw, hostname)
            _HOST_PORTS.put(key, out[hostname])
    return out


def _per_host_uploads(cluster: Cluster, at: datetime | None, hosts: set[str] | None = None
                      ) -> list[tuple[str, str, str, dict]]:
    """``[(hostname, kind, content hash, document)]``: each host's (of ``hosts``, else every host's)
    newest readable LLDP and ibdev2netdev upload."""
    rows = _taken(Fabric.objects.filter(cluster=cluster, status=Fabric.Status.OK, kind__in=HOST_KINDS,
                                        host__isnull=False))
    if hosts is not None:
        rows = rows.filter(host__hostname__in=sorted(hosts))
    if at is not None:
        rows = rows.filter(taken__lte=at)
    seen: set[tuple[str, str]] = set()
    out = []
    for hostname, kind, digest, document in rows.order_by("-taken", "-id").values_list(
            "host__hostname", "kind", "content_hash", "document"):
        group = "lldp" if kind in LLDP_KINDS else kind
        if (hostname, group) in seen or document is None:
            continue
        seen.add((hostname, group))
        out.append((hostname, kind, digest, document))
    return sorted(out, key=lambda r: (r[0], r[1]))


def _lldp_rows(per_host: list[tuple[str, str, str, dict]]) -> dict[str, list[dict]]:
    """``{host: [{"interface", "nic", "port", "switch", "switch_port", "chassis_id", "mgmt_ips"}]}``: the
    switch and switch port each interface is cabled to (LLDP), with its RDMA device (ibdev2netdev)."""
    netdevs: dict[str, dict[str, tuple[str, int]]] = {}
    for hostname, kind, _pk, document in per_host:
        if kind == "ibdev2netdev":
            netdevs[hostname] = {e["netdev"]: (e["ca"], e["port"]) for e in document.get("entries") or []}
    out: dict[str, list[dict]] = {}
    for hostname, kind, _pk, document in per_host:
        if kind not in LLDP_KINDS:
            continue
        for n in document.get("neighbors") or []:
            nic, port = netdevs.get(hostname, {}).get(n.get("interface"), (None, None))
            out.setdefault(hostname, []).append({
                "interface": n.get("interface"), "nic": nic, "port": port, "switch": n.get("switch"),
                "switch_port": n.get("switch_port"), "chassis_id": n.get("chassis_id"),
                "mgmt_ips": list(n.get("mgmt_ips") or [])})
    return out


def _unmatched_hosts(host_ports: dict[str, list[dict]], attached: dict) -> list[dict]:
    out = []
    for hostname in sorted(host_ports):
        if hostname in attached["hosts"]:
            continue
        guids = [r["port_guid"] or r["node_guid"] for r in host_ports[hostname]]
        reason = ("its port GUIDs are not in this discovery" if guids else
                  "it reports no InfiniBand port GUIDs (ibstat, sysfs_ib or ibv_devinfo) and no adapter's node "
                  "description names it")
        out.append({"host": hostname, "reason": reason, "port_guids": guids})
    return out


def _unclaimed(G: nx.Graph, host_of_ca: dict[str, str], hostnames: set[str]) -> list[dict]:
    out = []
    for ca in fabric_graphs.host_cas(G):
        if host_of_ca.get(ca) in hostnames:
            continue
        d = G.nodes[ca]
        port = next((p for _n, p in sorted(d["ports"].items(), key=lambda kv: str(kv[0])) if p.get("peer")), {})
        leaf = port.get("peer")
        out.append({"ca": ca, "name": d.get("name"), "guid": d.get("guid"), "described_host": d.get("host"),
                    "leaf_name": G.nodes[leaf].get("name") if leaf in G else None, "leaf_port": port.get("peer_port")})
    return out


def _attach(fabric: Fabric, G: nx.Graph, cluster: Cluster,
            at: datetime | None) -> tuple[dict, dict, list, list, tuple, dict]:
    hosts = list(Host.objects.filter(cluster=cluster).order_by("pk").values_list("pk", "hostname"))
    snapshots = _snapshots_in_force(cluster, at)
    per_host = _per_host_uploads(cluster, at)
    key = (fabric.content_hash, tuple(hosts), tuple(s[3] for s in snapshots), tuple(p[2] for p in per_host))
    cached = _ATTACHED.get(key)
    if cached is not None:
        return cached
    host_ports = _host_ports(snapshots)
    for _pk, hostname in hosts:
        host_ports.setdefault(hostname, [])  # every host's name may join a node description
    attached = fabric_graphs.attach_hosts(G, host_ports)
    attached["lldp"] = _lldp_rows(per_host)
    host_of_ca = {row["ca"]: hostname for hostname, rows in attached["hosts"].items() for row in rows}
    value = (attached, host_of_ca, _unmatched_hosts(host_ports, attached), _unclaimed(G, host_of_ca, set(host_ports)),
             key, host_ports)
    _ATTACHED.put(key, value)
    return value


def cluster_fabric(cluster: Cluster, at: datetime | None = None, *, fabric: Fabric | None = None) -> ClusterFabric | None:
    """The fabric in force at ``at`` (or ``fabric``) with the cluster's hosts attached; see the module docstring."""
    if fabric is None:
        fabric = latest_fabric(cluster, at)
        if fabric is None:
            return None
    elif fabric.cluster_id != cluster.pk:
        raise ValueError(f"fabric {fabric.pk} belongs to another cluster")
    G = fabric_graph(fabric)
    attached, host_of_ca, unmatched, unclaimed, key, host_ports = _attach(fabric, G, cluster, at)
    return ClusterFabric(fabric=fabric, graph=G, attachments=attached, host_of_ca=host_of_ca,
                         unmatched_hosts=unmatched, unclaimed=unclaimed, join_key=(fabric.pk,) + key,
                         host_ports=host_ports)


def fabric_view(cf: ClusterFabric) -> FabricView:
    """The :class:`FabricView` of a cluster's fabric and hosts, built once per Fabric id and host join
    (``cf.join_key``: the discovery, the hosts, their snapshots and LLDP uploads in force); shared:
    do not change it."""
    key = cf.join_key or (cf.fabric.pk, cf.fabric.content_hash, id(cf.attachments))
    kept = _VIEWS.get(key)
    if kept is not None and kept[0] is cf.graph:
        return kept[1]
    view = FabricView.build(cf.graph, cf.attachments)
    _VIEWS.put(key, (cf.graph, view))
    return view


def lldp_neighbors(cluster: Cluster, hosts: Iterable[str], at: datetime | None = None) -> dict[str, dict[str, dict]]:
    """``{host: {nic: {"switch", "switch_port"}}}`` of these hosts from their newest LLDP uploads at ``at``
    (the RDMA device from their ibdev2netdev upload; the interface name when there is none): what
    ``cluster.path_between(neighbors=...)`` takes for ports no InfiniBand discovery sees."""
    wanted = set(hosts)
    rows = _lldp_rows(_per_host_uploads(cluster, at, wanted))
    return {host: {(r["nic"] or r["interface"]): {"switch": r["switch"], "switch_port": r["switch_port"]}
                   for r in entries if r.get("switch") and (r["nic"] or r["interface"])}
            for host, entries in rows.items()}


def path_fabric(cluster_a: Cluster, cluster_b: Cluster, at: datetime | None = None, *, stored: bool | None = None
                ) -> tuple[ClusterFabric | None, str | None]:
    """The fabric a path between a host of ``cluster_a`` and one of ``cluster_b`` goes through, in
    force at ``at``; else None and why (see the module docstring). ``stored`` False: the caller
    knows the cluster has no readable discovery at all (nothing is looked up)."""
    if cluster_a.pk != cluster_b.pk:
        return None, (f"the hosts are in two clusters ({cluster_a.name}, {cluster_b.name}): no one fabric "
                      "discovery joins them")
    cf = cluster_fabric(cluster_a, at) if stored is not False else None
    if cf is None:
        when = (f" taken by {at:%Y-%m-%d %H:%M} UTC"
                if stored is not False and at is not None and latest_fabric(cluster_a) else "")
        return None, f"no discovery stored for cluster {cluster_a.name}{when} (send one: agent --fabric)"
    return cf, None



def _job_docs(cluster: Cluster, hosts: list[str]) -> dict[str, dict]:
    """``{host: {"hostname", "nics"}}`` of the hosts' snapshots in force: the part the job model reads."""
    wanted = set(hosts)
    ids = [snap for hostname, snap, _u, _d in _snapshots_in_force(cluster, None) if hostname in wanted]
    return {h: {"hostname": h, "nics": nics or []}
            for h, nics in Snapshot.objects.filter(pk__in=ids).values_list("host__hostname", "document__nics")}


def job_on_fabric(cluster: Cluster, spec: str, algorithm: str = "ring") -> dict | None:
    """A job's contention, findings and verdict on the cluster's fabric in force; see the module docstring."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm: {str(algorithm)[:20]!r} is not one of {', '.join(ALGORITHMS)}")
    cf = cluster_fabric(cluster)
    if cf is None:
        return None
    names = list(Host.objects.filter(cluster=cluster).values_list("hostname", flat=True))
    hosts, unmatched = job_hosts(spec, names)
    if not hosts:
        shown = ", ".join(unmatched[:5]) or "nothing"
        raise ValueError(f"hosts: {shown} names no host of cluster {cluster.name} (give names, comma or space "
                         "separated, or a glob such as h100-n0*)")
    if len(hosts) > MAX_JOB_HOSTS:
        raise ValueError(f"hosts: {len(hosts)} hosts named; at most {MAX_JOB_HOSTS} per query")
    report = job_report(fabric_view(cf), _job_docs(cluster, hosts), hosts, algorithm)
    return {"cluster": cluster.name, "fabric_id": cf.fabric.pk, "hosts": hosts, "unmatched": unmatched,
            "algorithm": algorithm, **report}
