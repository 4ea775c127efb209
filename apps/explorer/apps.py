from django.apps import AppConfig


class ExplorerConfig(AppConfig):
    """The web pages: clusters, hosts, paths, compare, paste, capacity."""

    name = "apps.explorer"
    label = "explorer"
