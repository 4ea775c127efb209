from django.apps import AppConfig


class TopologyConfig(AppConfig):
    """Command-line access to the domain core: parse, analyze, path."""

    name = "apps.topology"
    label = "topology"
