"""Shared fixtures: a logged-in client, and a cluster with an agent token.

``cluster_with_token`` yields ``(cluster, secret)``; ``agent_client`` is a Django test client that
sends ``Authorization: Bearer <secret>`` on every request.
"""

from __future__ import annotations

import os

import pytest

# Processes the tests start (manage.py commands, Celery workers) run with debug off, as in
# production, so they need a secret key of their own: a fixed, test-only one.
os.environ.setdefault("TOPOWEB_SECRET_KEY", "tests-only-secret-key-never-used-in-production-0123456789")


@pytest.fixture
def user(db, django_user_model):
    """A site admin (superuser: sees every cluster); access tests make members of their own."""
    return django_user_model.objects.create_superuser(username="alice", password="correct horse battery")


@pytest.fixture
def logged_in_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def cluster_with_token(db):
    from apps.ingest import services

    cluster = services.create_cluster(name="alpha")
    _, secret = services.issue_token(cluster=cluster, name="test")
    return cluster, secret


@pytest.fixture
def agent_client(cluster_with_token):
    from django.test import Client

    return Client(HTTP_AUTHORIZATION=f"Bearer {cluster_with_token[1]}")
