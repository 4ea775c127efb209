"""Celery application. With TOPOWEB_BROKER_URL unset, tasks run in-process (eager)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "topoweb.settings")

app = Celery("topoweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
