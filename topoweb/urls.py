"""URL routes: the JSON API and one include per app; no views here."""

from django.contrib import admin
from django.urls import include, path

from topoweb.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/v1/", api.urls),  # the JSON API (topoweb/api.py)
    path("", include("apps.ingest.urls")),  # /agent.py
    path("", include("apps.explorer.urls")),  # the pages
]

handler404 = "topoweb.errors.handler404"
handler500 = "topoweb.errors.handler500"
