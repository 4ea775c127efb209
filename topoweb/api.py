"""The JSON API under /api/v1/: the ingest app's endpoints (``apps.ingest.api``) and the drawings
the explorer exports (``apps.explorer.api_figures``), so that the data app needs none of the pages'
code."""

from apps.explorer import api_figures
from apps.ingest.api import api, error

api_figures.register(api, error)

__all__ = ["api"]
