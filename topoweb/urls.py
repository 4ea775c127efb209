"""URL routes: one include per app; no views here."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("apps.ingest.urls")),  # /api/v1/..., /agent.py
    path("", include("apps.explorer.urls")),  # the pages
]

handler404 = "topoweb.errors.handler404"
handler500 = "topoweb.errors.handler500"
