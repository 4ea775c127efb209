"""Explorer routes (namespace ``explorer``)."""

from django.urls import path

from apps.explorer import fabric_pages, run_pages, views

app_name = "explorer"

urlpatterns = [
    path("", views.clusters, name="clusters"),
    path("paste/", views.paste, name="paste"),
    path("paste/detect/", views.paste_detect, name="paste-detect"),
    path("runs/paste/", run_pages.run_paste, name="run-paste"),
    path("capacity/", views.capacity, name="capacity"),
    path("path/", views.path, name="path"),
    path("path/gpus/<int:snapshot_id>/", views.path_gpus, name="path-gpus"),
    path("path/share/", views.share_create, name="share-create"),
    path("shared/", views.share_list, name="share-list"),
    path("s/<str:token>/", views.share_view, name="share-view"),
    path("c/<str:cluster>/", views.cluster, name="cluster"),
    path("c/<str:cluster>/compare/", views.cluster_compare, name="cluster-compare"),
    path("c/<str:cluster>/fabric/", fabric_pages.fabric, name="fabric"),
    path("c/<str:cluster>/runs/<int:run_id>/", run_pages.run, name="run"),
    path("c/<str:cluster>/h/<str:hostname>/", views.host, name="host"),
    path("c/<str:cluster>/h/<str:hostname>/compare/", views.compare, name="compare"),
]
