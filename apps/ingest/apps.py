from django.apps import AppConfig


class IngestConfig(AppConfig):
    """Clusters, hosts, agent tokens, uploads and snapshots; the report API and the pipeline."""

    name = "apps.ingest"
    label = "ingest"
