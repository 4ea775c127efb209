"""Ingest routes: the node agent at /agent.py (topoweb.urls mounts the JSON API, topoweb.api)."""

from django.urls import path

from apps.ingest import views

urlpatterns = [
    path("agent.py", views.agent_script, name="agent-script"),
]
