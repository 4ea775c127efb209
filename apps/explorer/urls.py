"""Explorer routes (namespace ``explorer``)."""

from django.urls import path

from apps.explorer import capacity, fabric_pages, place_pages, plan_pages, run_pages, verdict, views

app_name = "explorer"

urlpatterns = [
    path("", views.clusters, name="clusters"),
    path("paste/", views.paste, name="paste"),
    path("paste/detect/", views.paste_detect, name="paste-detect"),
    path("runs/paste/", run_pages.run_paste, name="run-paste"),
    path("capacity/", views.capacity, name="capacity"),
    path("capacity/s/<str:token>/", capacity.capacity_shared, name="capacity-shared"),
    path("path/", views.path, name="path"),
    path("path/gpus/<int:snapshot_id>/", views.path_gpus, name="path-gpus"),
    path("path/share/", views.share_create, name="share-create"),
    path("shared/", views.share_list, name="share-list"),
    path("s/<str:token>/", views.share_view, name="share-view"),
    path("c/<str:cluster>/", views.cluster, name="cluster"),
    path("c/<str:cluster>/compare/", views.cluster_compare, name="cluster-compare"),
    path("c/<str:cluster>/fabric/", fabric_pages.fabric, name="fabric"),
    path("c/<str:cluster>/place/", place_pages.place, name="place"),
    path("c/<str:cluster>/runs/<int:run_id>/", run_pages.run, name="run"),
    path("c/<str:cluster>/h/<str:hostname>/", views.host, name="host"),
    path("c/<str:cluster>/h/<str:hostname>/compare/", views.compare, name="compare"),
    path("c/<str:cluster>/h/<str:hostname>/whatif/", plan_pages.whatif, name="whatif"),
    path("plans/<int:plan_id>/", plan_pages.plan, name="plan"),
    path("plans/<int:plan_id>/delete/", plan_pages.plan_delete, name="plan-delete"),
    path("plans/s/<str:token>/", plan_pages.plan_shared, name="plan-shared"),
    path("whatif/", plan_pages.whatif_paste, name="whatif-paste"),
    path("c/<str:cluster>/h/<str:hostname>/nic-roles/", verdict.nic_roles_post, name="nic-roles"),
]
