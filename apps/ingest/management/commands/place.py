"""python manage.py place --cluster C --nodes N --gpus-per-node G [--gpus TOTAL] [--seed S] [--format json|text]

Chooses hosts and GPUs for a job on the cluster's latest snapshots and its fabric in force
(``apps.ingest.placing.cluster_placement``; the choice is ``apps.domain.placement``'s) and prints
what to paste: the Slurm ``--nodelist``, a hostfile, each host's ``CUDA_VISIBLE_DEVICES`` and
``NCCL_IB_HCA``, the ``torchrun`` line; with the expected busbw next to a random placement of the
same size (``--seed``, default 0). ``--gpus TOTAL`` alone spreads a GPU count over the fewest
nodes. An operator tool: no access check. Errors (unknown cluster, a job that does not fit) name
the problem on stderr, exit 2.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from apps.domain.placement import render_text
from apps.ingest.models import Cluster
from apps.ingest.placing import RANDOM_SEED, PlacementError, cluster_placement


class Command(BaseCommand):
    help = "Place a job (N nodes x G GPUs, or a GPU count) on a cluster's healthy hosts and print what to paste."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", required=True, help="cluster name")
        parser.add_argument("--nodes", type=int, help="nodes the job runs on")
        parser.add_argument("--gpus-per-node", type=int, help="GPUs per node (default: every GPU of a host)")
        parser.add_argument("--gpus", type=int, help="total GPUs (instead of --nodes, or with it)")
        parser.add_argument("--seed", type=int, default=RANDOM_SEED, help="seed of the random placement compared")
        parser.add_argument("--format", choices=("json", "text"), default="text")

    def handle(self, *args, cluster: str, nodes: int | None, gpus_per_node: int | None, gpus: int | None,
               seed: int, format: str, **options) -> None:
        found = Cluster.objects.filter(name=cluster).first()
        if found is None:
            raise CommandError(f"--cluster: no cluster {cluster!r}", returncode=2)
        try:
            result = cluster_placement(found, nodes=nodes, gpus_per_node=gpus_per_node, gpus=gpus, seed=seed)
        except PlacementError as exc:
            raise CommandError(f"--{exc.field.replace('_', '-')}: {str(exc).split(': ', 1)[1]}", returncode=2) from None
        if format == "json":
            self.stdout.write(json.dumps(result, indent=2, default=str))
        else:
            self.stdout.write(render_text(result), ending="")
