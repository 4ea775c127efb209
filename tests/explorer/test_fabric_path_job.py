"""Cross-host paths through the stored fabric (API, path page, share link), and a job's contention on
the fabric page and its API (apps/ingest/selectors.path_between_snapshots, fabrics.fabric_view,
fabrics.job_on_fabric, apps/explorer/path_fabric.py, fabric_pages.job_context).

The demo's fabric is SYNTHETIC (apps/ingest/demo/fleet_fabric.py), read here as a person reads its
text: one leaf per rail, ``DEMO-IBLEAF-R0`` .. ``-R7``, each with 8 cables to each of two spines
``DEMO-IBSPINE-1``/``-2``; ``h100-n01``'s mlx5_0 is on R0 port 1 and ``h100-n09``'s mlx5_3 on R3
port 9; the L40S hosts use RoCE (not in the discovery); h100-n15's mlx5_2 cable runs 4X HDR.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import call_command

from apps.explorer.path_fabric import fabric_panel
from apps.ingest import fabrics
from apps.ingest.models import Fabric
from tests.explorer import helpers as h


@pytest.fixture(autouse=True)
def _fresh_caches():
    fabrics.clear_caches()
    yield
    fabrics.clear_caches()


@pytest.fixture
def demo(db, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        call_command("load_demo", stdout=io.StringIO(), stderr=io.StringIO())
    return Fabric.objects.get(cluster__name="demo", kind="ibnetdiscover")


def test_the_demo_path_goes_through_its_leaves_and_spines_everywhere(signed_in, demo):
    api = signed_in.get("/api/v1/path?src=demo/h100-n01/GPU0&dst=demo/h100-n09/GPU3").json()
    assert (api["fabric"], api["fabric_id"], api["fabric_reason"]) == ("discovered", demo.pk, None)
    assert (api["leaf_src"], api["leaf_dst"]) == ("MF0;DEMO-IBLEAF-R0:MQM9700/U1", "MF0;DEMO-IBLEAF-R3:MQM9700/U1")
    names = [e["name"] for e in api["fabric_hops"] if e["kind"] == "switch"]
    assert names[0] == "MF0;DEMO-IBLEAF-R0:MQM9700/U1" and names[-1] == "MF0;DEMO-IBLEAF-R3:MQM9700/U1"
    assert "IBSPINE" in names[1] and api["equal_cost_paths"] == 2  # one route over each of the two spines
    uplink = next(e for e in api["fabric_hops"] if e.get("tier") == "leaf-spine")
    assert (uplink["links"], uplink["width"], uplink["speed"], uplink["equal_cost"]) == (8, "4X", "NDR", 2)
    first = next(e for e in api["fabric_hops"] if e.get("tier") == "host-leaf")
    assert first["to_port"] == 1

    page = signed_in.get("/path/?src=demo/h100-n01/GPU0&dst=demo/h100-n09/GPU3").content.decode()
    block = page[page.index('id="fabric-route"'):page.index('id="hop-table"')]
    assert 'data-fabric="discovered"' in block and "2 equal-cost routes" in block
    assert "DEMO-IBLEAF-R0" in block and "DEMO-IBSPINE" in block and "DEMO-IBLEAF-R3" in block
    assert "host-leaf" in block and "bottleneck" in block  # the NIC's own cable is the narrowest place here
    fig = json.loads(re.search(r'data-figure="fig-path">(.*?)</script>', page, re.S).group(1))
    legend = {t.get("name") for t in fig["data"]}
    assert {"leaf switch (discovered)", "spine switch (discovered)"} <= legend
    assert "network switch (assumed: rail model)" not in legend



def test_roce_hosts_of_a_cluster_with_a_discovery_take_the_rail_model_and_say_why(signed_in, demo):
    api = signed_in.get("/api/v1/path?src=demo/l40s-n01/GPU0&dst=demo/l40s-n02/GPU0").json()
    assert api["fabric"] == "assumed" and api["fabric_id"] == demo.pk
    assert "l40s-n01" in api["fabric_reason"]
    page = signed_in.get("/path/?src=demo/l40s-n01/GPU0&dst=demo/l40s-n02/GPU0").content.decode()
    assert 'data-fabric="assumed"' in page and "cannot place this route" in page


def test_a_cluster_without_a_discovery_is_assumed_and_says_how_to_send_one(signed_in):
    c = h.cluster()
    a, b = h.standard_host(c, "node-a"), h.standard_host(c, "node-b")
    api = signed_in.get(f"/api/v1/path?src={a.pk}/GPU0&dst={b.pk}/GPU0").json()
    assert (api["fabric"], api["fabric_id"]) == ("assumed", None)
    assert api["fabric_reason"] == "no discovery stored for cluster lab (send one: agent --fabric)"
    page = signed_in.get(f"/path/?src={a.pk}/GPU0&dst={b.pk}/GPU0").content.decode()
    line = re.search(r'id="fabric-line"[^>]*>(.*?)</p>', page, re.S).group(1)
    assert line.startswith("Fabric assumed: no discovery stored for cluster lab (send one: agent --fabric).")


def test_a_job_on_the_demo_fabric_page_and_api(signed_in, demo):
    api = signed_in.get("/api/v1/clusters/demo/fabric/job?hosts=h100-n0*,h100-n10&algorithm=ring").json()
    assert api["hosts"] == [f"h100-n{i:02d}" for i in range(1, 11)] and api["fabric_id"] == demo.pk
    leaves = api["contention"]["leaves"]
    assert len(leaves) == 8 and {r["uplinks"] for r in leaves} == {16}  # 2 spines x 8 cables per leaf
    # one leaf per rail: every ring turns on its rail's leaf, no flow climbs to the spines
    assert all(r["flows"] == 0 for r in leaves) and api["contention"]["rail_aligned"] is True
    assert api["verdict"].startswith("10 hosts: ring traffic stays on 8 leaves (no flow crosses an uplink)")
    assert api["verdict"].endswith("- no fabric bottleneck.")
    assert api["leaf_rails"]["MF0;DEMO-IBLEAF-R4:MQM9700/U1"] == "mlx5_4"

    with_slow = signed_in.get("/api/v1/clusters/demo/fabric/job?hosts=h100-n14 h100-n15&algorithm=tree").json()
    assert [f["rule"] for f in with_slow["findings"]] == ["L08"]  # h100-n15's mlx5_2 at 4X HDR among NDR links
    assert "h100-n15/mlx5_2" in with_slow["findings"][0]["devices"]

    bad = signed_in.get("/api/v1/clusters/demo/fabric/job?hosts=nope*")
    assert bad.status_code == 400 and bad.json()["field"] == "hosts"
    assert signed_in.get("/api/v1/clusters/demo/fabric/job?hosts=h100-n01&algorithm=x").json()["field"] == "algorithm"

    page = signed_in.get("/c/demo/fabric/?job=h100-n14+h100-n15&algorithm=tree").content.decode()
    assert "2 hosts: tree traffic stays on 8 leaves" in page
    table = page[page.index('id="job-table"'):page.index("The job's findings")]
    assert table.count("<tr") == 9 and "DEMO-IBLEAF-R2" in table
    assert "Mixed link speeds in one job" in page


def test_no_discovery_means_no_job_answer(signed_in):
    c = h.cluster()
    h.standard_host(c, "node-a")
    r = signed_in.get(f"/api/v1/clusters/{c.name}/fabric/job?hosts=node-a")
    assert r.status_code == 404


def test_fabric_panel_of_a_fabric_cut_bottleneck():
    result = {"same_host": False, "fabric": "discovered", "equal_cost_paths": 4, "equal_cost_port_paths": 4,
              "leaf_src": "MF0;L1:X/U1", "leaf_dst": "MF0;L2:X/U1", "fabric_id": 3, "bottleneck": 1,
              "fabric_cut": {"expected_gbs": 12.0, "where": "fabric", "leaf_cut_expected_gbs": 12.0},
              "hops": [{"host": None, "tier": "host-leaf"}, {"host": None, "tier": "leaf-spine"},
                       {"host": None, "tier": "spine-leaf"}, {"host": None, "tier": "leaf-host"}],
              "fabric_hops": [{"kind": "fabric_link", "from": "a", "to": "MF0;L1:X/U1", "tier": "host-leaf"},
                              {"kind": "switch", "name": "MF0;L1:X/U1", "tier": "leaf", "choices": 1},
                              {"kind": "fabric_link", "from": "MF0;L1:X/U1", "to": "S", "tier": "leaf-spine",
                               "width": "4X", "speed": "EDR", "equal_cost": 4, "links": 1}]}
    panel = fabric_panel(result)
    assert panel["bottleneck_in_fabric"] is True
    assert panel["line"] == ("Fabric discovered: L1 -> L2, 4 equal-cost routes (4 counting parallel cables); narrowest "
                             "cut 12.0 GB/s per direction between the leaves: the bottleneck.")
    assert [r["bottleneck"] for r in panel["rows"]] == [False, False, True]


def test_the_cluster_page_lists_what_only_a_comparison_of_hosts_shows(signed_in, demo):
    """The demo's h100-n06 has mlx5_4's port Down where its 23 H100 peers have 8 Active ports (the
    demo generator's odd one out): H08 on the cluster page, naming it and linking its page."""
    page = signed_in.get("/c/demo/").content.decode()
    section = page[page.index('id="fleet-findings"'):page.index("<h2>Layouts</h2>")]
    assert "H08" in section and 'href="/c/demo/h/h100-n06/"' in section
    assert "h100-n06 has 7 Active compute InfiniBand port(s)" in section
    assert "<b>F08</b>" not in section  # the demo's rails are cabled to their own leaves


def test_the_path_panel_says_which_switches_lldp_named():
    from apps.domain.cluster import path_between
    from tests.domain.fabric_paths.inputs import nic_doc

    a, b = nic_doc("roce-01", link_layer="Ethernet"), nic_doc("roce-02", link_layer="Ethernet")
    lldp = {"roce-01": {"mlx5_0": {"switch": "leaf-a01", "switch_port": "Ethernet0"}},
            "roce-02": {"mlx5_0": {"switch": "leaf-b01", "switch_port": "Ethernet4"}}}
    line = fabric_panel({**path_between(a, "GPU0", b, "GPU0", neighbors=lldp), "fabric_id": None})["line"]
    assert line.startswith("Switches named by LLDP: leaf-a01 and leaf-b01; what connects them is not discovered")
