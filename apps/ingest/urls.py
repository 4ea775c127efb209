"""Ingest routes: the JSON API under /api/v1/ and the node agent at /agent.py."""

from django.urls import path

from apps.ingest import views
from apps.ingest.api import api

urlpatterns = [
    path("api/v1/", api.urls),
    path("agent.py", views.agent_script, name="agent-script"),
]
