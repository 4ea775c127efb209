"""Fixtures of the deployment tests: a fake nvidia-smi, and a cluster token on a live server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ingest.helpers import TOPO_H100


@pytest.fixture
def fake_tools(tmp_path) -> Path:
    """A bin folder whose nvidia-smi prints a real 8x H100 `topo -m` capture and fails otherwise
    (the other tools are missing): enough for the agent to have a topology to send."""
    b = tmp_path / "fakebin"
    b.mkdir()
    smi = b / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\nif [ "$1 $2" = "topo -m" ]; then cat {TOPO_H100}; else exit 3; fi\n')
    smi.chmod(0o755)
    return b


@pytest.fixture
def live_token(live_server, transactional_db) -> tuple[str, str, str]:
    """``(server_url, cluster_name, agent_token)`` of a fresh cluster on the live test server."""
    from apps.ingest import services

    cluster = services.create_cluster(name="fleet")
    _, secret = services.issue_token(cluster=cluster, name="deploy-test")
    return live_server.url, cluster.name, secret

