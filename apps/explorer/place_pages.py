"""The placement page, ``/c/<cluster>/place/``: a job's hosts, GPUs and NICs, and what to paste.

A GET form (``nodes``, ``gpus_per_node``, ``gpus``, ``seed``; a shareable address) answered by
``apps.ingest.placing.cluster_placement``: the Slurm ``--nodelist``, the hostfile, per host its
ranks, GPUs, ``CUDA_VISIBLE_DEVICES``, ``NCCL_IB_HCA`` and leaves, the ``torchrun`` launch lines,
the expected busbw beside a random placement's, and the hosts skipped with their reasons. A job
that does not fit shows the error on the form. Viewer role.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from apps.explorer.views import cluster_or_404
from apps.ingest.placing import RANDOM_SEED, PlacementError, cluster_placement

FIELDS = ("nodes", "gpus_per_node", "gpus", "seed")


def _form(request: HttpRequest) -> tuple[dict, dict[str, int | None], str | None]:
    """(the values as typed, the integers, the first error naming its field)."""
    raw = {f: request.GET.get(f, "").strip() for f in FIELDS}
    values: dict[str, int | None] = {}
    for f, text in raw.items():
        if not text:
            values[f] = None
            continue
        try:
            values[f] = int(text)
        except ValueError:
            return raw, values, f"{f}: {text[:20]!r} is not a whole number"
    return raw, values, None


@login_required
@require_GET
def place(request: HttpRequest, cluster: str) -> HttpResponse:
    c = cluster_or_404(request, cluster)
    raw, values, problem = _form(request)
    result = None
    asked = any(values.get(f) is not None for f in ("nodes", "gpus"))
    if asked and problem is None:
        try:
            result = cluster_placement(c, nodes=values["nodes"], gpus_per_node=values["gpus_per_node"],
                                       gpus=values["gpus"],
                                       seed=values["seed"] if values["seed"] is not None else RANDOM_SEED)
        except PlacementError as exc:
            problem = str(exc)
    elif not asked and any(raw.values()) and problem is None:
        problem = "nodes: give nodes (with gpus per node), or gpus (a total)"
    launch = ""
    if result:
        launch = "\n".join(f"# {h['host']}\n{result['launch'][h['host']]}" for h in result["hosts"])
    return render(request, "explorer/place.html", {"cluster": c, "form": raw, "problem": problem,
                                                    "result": result, "launch": launch})
