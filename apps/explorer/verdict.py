"""The verdict on the pages: the host page's verdict box, consistency banner and NIC-role form,
the one-sentence verdicts of the path and compare pages (figures from ``apps.domain.verdict``).

``host_context(doc, snap, user, role=None) -> dict``  what host.html needs (``verdict``, ``nic_role_rows``,
    ``can_set_roles``, and the findings and settings with the held-back advice removed); ``role``: the
    person's role in the host's cluster when the caller has read it (else it is read here).
``nic_roles_post(request, cluster, hostname)``  the form's POST: editor role; one select per NIC
    ("" = the engine's classification, else compute / storage / management).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from apps.domain import verdict as dv
from apps.domain.names import natural_key
from apps.domain.shellsafe import export_block
from apps.explorer import selectors as ex
from apps.ingest import access, nic_roles
from apps.ingest.models import Host, Snapshot

__all__ = ["host_context", "nic_roles_post", "path_sentence", "compare_sentence", "gdr_words"]


def gdr_words(doc: dict, gpu: str) -> dict | None:
    """The GDR/PXN words of one GPU: the same function the host page's table and verdict read."""
    return dv.gpu_gdr(doc, gpu)


def _role_rows(doc: dict, stored: dict) -> list[dict]:
    rows = []
    for n in sorted(doc.get("nics") or [], key=lambda n: natural_key(str(n.get("name")))):
        said = stored.get(n.get("name")) or {}
        rows.append({"name": n.get("name"), "compute": bool(n.get("compute")), "state": n.get("state"),
                     "rate_gbps": n.get("rate_gbps"), "role": said.get("role"), "by": said.get("by"),
                     "at": said.get("at")})
    return rows


def host_context(doc: dict, snap: Snapshot, user, role: str | None = None) -> dict:
    stored = snap.nic_roles or {}
    can_set_roles = (access.covers(role, access.EDITOR) if role is not None
                     else access.has_role(user, snap.host.cluster, access.EDITOR))
    v = dv.host_verdict(doc, stored)
    advice = v["advice"]
    shown = {**doc, "findings": advice["findings"]}
    by_gpu = {r["gpu"]: r for r in v["gpus"]}
    return {
        "verdict": v,
        "findings": ex.sorted_findings(shown),
        "nccl_settings": advice["settings"],
        "nccl_export": "\n".join(export_block(advice["settings"])),
        "held_findings": advice["held_findings"], "held_settings": advice["held_settings"],
        "nic_role_rows": _role_rows(doc, stored),
        "can_set_roles": can_set_roles,
        "role_choices": dv.ROLES,
        "gpu_nic": [{**e, "gdr_pxn": by_gpu.get(e["gpu"], {}).get("gdr"),
                     "effective_gbs": by_gpu.get(e["gpu"], {}).get("effective_gbs")}
                    for e in sorted(doc.get("gpu_nic") or [], key=lambda e: natural_key(e["gpu"]))],
        "numa_words": dv.numa_words(doc.get("summary")),
        "nic_rates": dv.nic_rates_words(doc, snap.nic_models),
    }


def path_sentence(result: dict) -> str | None:
    return dv.path_sentence(result)


def compare_sentence(doc_a: dict, doc_b: dict) -> str | None:
    return dv.compare_sentence(doc_a, doc_b)


@login_required
@require_POST
def nic_roles_post(request: HttpRequest, cluster: str, hostname: str) -> HttpResponse:
    h = Host.objects.select_related("cluster").filter(cluster__name=cluster, hostname=hostname).first()
    if h is None or not access.has_role(request.user, h.cluster, access.VIEWER):
        raise Http404(f"no host {hostname!r} in cluster {cluster!r}")
    if not access.has_role(request.user, h.cluster, access.EDITOR):
        return HttpResponse(f"Setting NIC roles in cluster {h.cluster.name!r} needs the editor role.", status=403,
                            content_type="text/plain")
    snap = Snapshot.objects.select_related("upload", "host__cluster").filter(
        host=h, pk=request.POST.get("snapshot") or 0).first()
    if snap is None:
        raise Http404(f"no snapshot {request.POST.get('snapshot')!r} of {hostname!r}")
    names = [n.get("name") for n in (snap.document or {}).get("nics") or []]
    changes = {}
    for name in names:
        key = f"role_{name}"
        if key in request.POST:
            changes[name] = request.POST.get(key) or None
    url = reverse("explorer:host", args=[h.cluster.name, h.hostname]) + f"?snapshot={snap.pk}"
    if not changes:
        messages.error(request, "No NIC role was sent.")
        return redirect(url)
    try:
        nic_roles.set_roles(snap, changes, request.user)
    except (ValueError, nic_roles.RolesUnavailable) as exc:
        messages.error(request, f"NIC roles not saved: {exc}")
        return redirect(url)
    set_ = sorted((n for n, r in changes.items() if r), key=natural_key)
    messages.success(request, f"NIC roles saved ({len(set_)} set, {len(changes) - len(set_)} left to the engine); "
                              "the snapshot was analysed again with them.")
    return redirect(url + "#verdict")
