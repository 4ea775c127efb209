"""Shared fixtures: a logged-in client, and a cluster with an agent token.

``cluster_with_token`` yields ``(cluster, secret)``; ``agent_client`` is a Django test client that
sends ``Authorization: Bearer <secret>`` on every request.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def user(db, django_user_model):
    return django_user_model.objects.create_user(username="alice", password="correct horse battery")


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
