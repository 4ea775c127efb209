"""The fabric page /c/<cluster>/fabric/ (apps/explorer/fabric_pages.py) with fabrics stored through
apps.ingest.fabrics: the sentence on top, the figure, the problem tables, the versions, the empty
state, and access as on the other cluster pages.

Facts read off the real captures: the DGX H100 SuperPOD ibnetdiscover has 40 switches (31 named
IBLEAF, 9 IBSPINE) and 582 CAs, 40 of them "Mellanox Technologies Aggregation Node", so 542 host
adapters; the 2009 IBM capture has one MT43132 switch and two CAs, "compute-00-01 HCA-1" and
"compute-00-00 HCA-1".
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.test import Client

from apps.explorer import fabric_pages
from apps.ingest import access, fabrics
from apps.ingest.models import Fabric
from tests.domain.test_fabric_compare import LEAF, SPINE, SUPERPOD, superpod_next_day
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db

FIX = Path(__file__).resolve().parents[1] / "fixtures"  # real captures copied from ../shared/realdata
IBM_2NODE = FIX / "ibnetdiscover" / "ibm_pcm_2node_mt43132_8port_switch_sdr_2009.txt"


@pytest.fixture(autouse=True)
def _fresh_caches():
    fabrics.clear_caches()
    yield
    fabrics.clear_caches()


def store(cluster, path_or_text, collected_at: str, name: str = "") -> Fabric:
    text = path_or_text.read_text() if hasattr(path_or_text, "read_text") else path_or_text
    row, _ = fabrics.submit_fabric(cluster=cluster, text=text, via="web", collected_at=collected_at,
                                   source_name=name or getattr(path_or_text, "name", "derived.txt"))
    assert row.status == Fabric.Status.OK, row.error
    return row


def figure_of(html: str) -> dict:
    m = re.search(r'<script id="fig-fabric-data" type="application/json" data-figure="fig-fabric">(.*?)</script>',
                  html, re.S)
    assert m, "the page embeds the fabric figure"
    return json.loads(m.group(1))


def test_without_a_discovery_the_page_says_how_to_send_one(signed_in):
    c = h.cluster()
    html = signed_in.get(f"/c/{c.name}/fabric/").content.decode()
    empty = html[html.index('id="fabric-empty"'):]
    assert "No fabric discovery stored" in empty
    assert "--fabric" in empty and "/api/v1/fabric" in empty and 'href="/paste/"' in empty
    assert "fig-fabric-data" not in html  # no empty chart
    assert "Nothing sent yet" in html


def test_the_superpod_page_says_what_it_is_draws_it_by_group_and_lists_its_version(signed_in):
    c = h.cluster()
    row = store(c, SUPERPOD, "2025-08-06T16:11:23Z")
    resp = signed_in.get(f"/c/{c.name}/fabric/")
    assert resp.status_code == 200
    html = resp.content.decode()
    sentence = re.search(r'id="fabric-sentence">(.*?)</p>', html).group(1)
    assert sentence == ("40 switches in 2 tiers, 542 HCAs; every link at its capability, no port down that leads "
                        "anywhere; 542 HCAs no host claims.")
    assert html.index('id="fabric-sentence"') < html.index('id="fig-fabric"') < html.index('id="fabric-versions"')
    assert "<span>31 leaf, 9 spine</span>" in html and "1,114 cables, 122 hosts named by the adapters" in html
    fig = figure_of(html)
    names = [t.get("name") for t in fig["data"]]
    assert "NDR 4X 50 GB/s" in names  # every cable of the capture is 4xNDR
    markers = [t for t in fig["data"] if t.get("meta") in ("switch", "group", "hosts", "host", "ca")]
    assert sum(len(t["x"]) for t in markers) <= 150
    hosts = [t for t in markers if t["meta"] == "hosts"]
    assert sum(int(n) for t in hosts for n in t["text"]) >= 122  # the hosts the adapters name, per leaf group
    versions = html[html.index('id="fabric-versions"'):]
    assert f'href="/api/v1/fabric/{row.pk}/raw"' in versions and "in force" in versions
    assert "40 switches, 542 HCAs, 1114 cables" in versions
    assert 'id="unclaimed"' in html and "a08-p1-dgx-04-c17 mlx5_5" in html
    # the fabric rules: b08-p1-dgx-08-c01's HCA-5 is on IBLEAF-04-08 port 1 (its neighbours' HCA-5 on another
    # leaf), and 69 adapters keep the default description "MT4129 ConnectX7   Mellanox Technologies"
    findings = html[html.index('id="fabric-findings"'):html.index('id="unclaimed"')]
    assert "L03" in findings and "b08-p1-dgx-08-c01: HCA-5 is cabled to MF0;B09-P1-IBLEAF-04-08:MQM9701/U1 port 1" \
        in findings
    assert "L06" in findings and "69 host adapters share the node description" in findings


def test_a_later_discovery_with_a_slow_cable_is_named_and_what_changed_is_listed(signed_in):
    c = h.cluster()
    store(c, SUPERPOD, "2025-08-06T16:11:23Z")
    store(c, superpod_next_day(SUPERPOD.read_text()), "2025-08-07T09:00:00Z", "next_day.txt")
    html = signed_in.get(f"/c/{c.name}/fabric/").content.decode()
    sentence = re.search(r'id="fabric-sentence">(.*?)</p>', html).group(1)
    assert sentence.startswith("40 switches in 2 tiers, 541 HCAs; 1 link trained below capability;")
    degraded = html[html.index('id="degraded"'):html.index('id="down-ports"')]
    assert f"{LEAF} port 35 &ndash; {SPINE} port 32" in degraded or \
        f"{SPINE} port 32 &ndash; {LEAF} port 35" in degraded
    assert "2X NDR" in degraded and "4X NDR" in degraded
    fig = figure_of(html)
    assert any(t.get("meta") == "degraded" for t in fig["data"])
    findings = html[html.index('id="fabric-findings"'):html.index('id="unclaimed"')]
    assert '<span class="sev sev-HIGH">HIGH</span> <b>Link trained below its capability</b>' in findings
    assert f"{LEAF} port 35 to {SPINE} port 32: trained at 2X NDR" in findings
    changes = html[html.index('id="fabric-changes"'):]
    assert f"a08-p1-dgx-04-c02 mlx5_5 moved from {LEAF} port 2 to {LEAF} port 18" in changes
    assert "4X NDR (50 GB/s) -&gt; 2X NDR (25 GB/s)" in changes
    assert html.count("in force") == 1  # one version is in force: the later one
    assert html.index("next_day.txt") < html.index(SUPERPOD.name)


def test_expand_draws_one_group_member_by_member(signed_in):
    c = h.cluster()
    store(c, SUPERPOD, "2025-08-06T16:11:23Z")
    closed = figure_of(signed_in.get(f"/c/{c.name}/fabric/").content.decode())
    groups = [cd[1] for t in closed["data"] if t.get("meta") == "group" for cd in t["customdata"]
              if cd[1].startswith("leaf-")]
    biggest = max((t for t in closed["data"] if t.get("meta") == "group"), key=lambda t: max(map(int, t["text"])))
    gid = biggest["customdata"][biggest["text"].index(max(biggest["text"], key=int))][1]
    assert gid in groups
    html = signed_in.get(f"/c/{c.name}/fabric/?expand={gid}").content.decode()
    assert f"group {gid}: " in html and "</b> is drawn one by one" in html and 'id="collapse"' in html
    opened = figure_of(html)
    switches = [t for t in opened["data"] if t.get("meta") == "switch"]
    assert sum(len(t["x"]) for t in switches) >= int(max(biggest["text"], key=int))
    unknown = signed_in.get(f"/c/{c.name}/fabric/?expand=no-such-group").content.decode()
    assert "nothing to expand called &#x27;no-such-group&#x27;" in unknown


def test_hosts_join_the_fabric_and_open_their_pages(signed_in):
    c = h.cluster()
    h.standard_host(c, "compute-00-01")  # joins "compute-00-01 HCA-1" by its node description
    h.standard_host(c, "node-x")  # the real mooncake ibstat: GUIDs this 2009 fabric does not have
    store(c, IBM_2NODE, "2009-06-01T00:00:00Z")
    html = signed_in.get(f"/c/{c.name}/fabric/").content.decode()
    sentence = re.search(r'id="fabric-sentence">(.*?)</p>', html).group(1)
    assert sentence == ("1 switch in 1 tier, 2 HCAs; every link at its capability, no port down that leads anywhere; "
                        "1 HCA no host claims, 1 host not found in the fabric.")
    fig = figure_of(html)
    hosts = {t["text"][i]: cd for t in fig["data"] if t.get("meta") == "host" for i, cd in enumerate(t["customdata"])}
    assert hosts["compute-00-01"] == ["host", f"/c/{c.name}/h/compute-00-01/"]
    assert hosts["compute-00-00"] == ["", ""]  # named by the fabric, unknown to topoweb: nothing to open
    assert "SDR 4X 1.25 GB/s" in [t.get("name") for t in fig["data"]]
    unmatched = html[html.index('id="unmatched-hosts"'):]
    assert f'href="/c/{c.name}/h/node-x/"' in unmatched and "its port GUIDs are not in this discovery" in unmatched
    findings = html[html.index('id="fabric-findings"'):html.index('id="unclaimed"')]
    # none of node-x's adapters is in this discovery: another subnet as far as it can tell, one LOW finding
    assert "Hosts whose adapters are all absent from the fabric</b> <span class=\"muted\">L05 &middot; node-x" in findings
    assert "1 host(s) report InfiniBand ports of which the discovery has none (node-x)" in findings
    unclaimed = html[html.index('id="unclaimed"'):html.index('id="unmatched-hosts"')]
    assert "compute-00-00 HCA-1" in unclaimed and "0x0002c9030002847c" in unclaimed


def test_the_cluster_page_links_to_the_fabric_page(signed_in):
    c = h.cluster()
    h.standard_host(c, "node-a")
    html = signed_in.get(f"/c/{c.name}/").content.decode()
    assert f'href="/c/{c.name}/fabric/" id="fabric-link"' in html


def test_access_is_the_cluster_pages_own(db, django_user_model):
    red, blue = h.cluster("red"), h.cluster("blue")
    store(red, IBM_2NODE, "2009-06-01T00:00:00Z")
    viewer = django_user_model.objects.create_user("viewer", password="pw")
    access.grant(cluster=red, role=access.VIEWER, username="viewer")
    client = Client()
    assert client.get("/c/red/fabric/").status_code == 302  # sign in first
    client.force_login(viewer)
    assert client.get("/c/red/fabric/").status_code == 200
    assert client.get("/c/blue/fabric/").status_code == 404  # another team's cluster does not exist for them
    assert client.get("/c/nowhere/fabric/").status_code == 404
    assert client.post("/c/red/fabric/").status_code == 405


def test_problems_and_sentence_of_a_fabric_with_a_port_down_to_a_host():
    """SYNTHETIC derivation of the real teaker iblinkinfo: the switch port 5 <-> teaker-7 cable reads
    Initializing (physically up, no subnet manager brought it up) at both ends."""
    from apps.domain import fabric
    from apps.domain.parsers import iblinkinfo
    text = (FIX / "iblinkinfo" / "qdr_infiniscale_iv_18port_teaker_8hosts_one_dual_port_ca.txt").read_text()
    old_ca = '5    1[  ] ==( 4X          10.0 Gbps Active/  LinkUp)==>       2    5[  ]'
    old_sw = '2    5[  ] ==( 4X          10.0 Gbps Active/  LinkUp)==>       5    1[  ]'
    assert text.count(old_ca) == 1 and text.count(old_sw) == 1
    text = text.replace(old_ca, old_ca.replace("Active/", "Initializing/")).replace(
        old_sw, old_sw.replace("Active/", "Initializing/"))
    G = fabric.build_fabric(iblinkinfo.parse(text))
    problems = fabric_pages.fabric_problems(G)
    assert sorted((p["name"], p["port"]) for p in problems["down"]) == [
        ("Infiniscale-IV Mellanox Technologies", 5), ("teaker-7 HCA-1", 1)]
    assert problems["to_host"] == 1  # one cable, listed from both ends
    assert problems["idle_count"] == 9  # ports 8, 10-13, 15-18: Down/Polling, nothing attached
    sentence = fabric_pages.fabric_sentence(fabric.summary(G), problems)
    assert sentence == "1 switch in 1 tier, 8 HCAs; 1 port to a host down."  # teaker-4..11, one CA each


def test_the_demo_fabric_draws_every_switch_and_opens_one_leafs_hosts(signed_in, django_capture_on_commit_callbacks):
    """The demo's SYNTHETIC H100 pod (apps/ingest/demo/fleet_fabric.py): one leaf per rail, two spines,
    24 H100 hosts, h100-n15's mlx5_2 cable at 4X HDR."""
    import io

    from django.core.management import call_command
    with django_capture_on_commit_callbacks(execute=True):
        call_command("load_demo", stdout=io.StringIO(), stderr=io.StringIO())
    html = signed_in.get("/c/demo/fabric/").content.decode()
    sentence = re.search(r'id="fabric-sentence">(.*?)</p>', html).group(1)
    assert sentence.startswith("10 switches in 2 tiers, ") and "1 link trained below capability" in sentence
    fig = figure_of(html)
    switches = [cd for t in fig["data"] if t.get("meta") == "switch" for cd in t["customdata"]]
    hosts = [(t["text"][i], cd) for t in fig["data"] if t.get("meta") == "hosts"
             for i, cd in enumerate(t["customdata"])]
    assert len(switches) == 10 and len(hosts) == 8  # every switch; the hosts of each rail's leaf as one marker
    assert sorted(n for n, _cd in hosts) == ["23"] + ["24"] * 7  # h100-n06's mlx5_4 has no link: not discovered
    leaf = next(cd[1] for n, cd in hosts if n == "24")
    opened = figure_of(signed_in.get(f"/c/demo/fabric/?expand={leaf}").content.decode())
    one_by_one = [cd for t in opened["data"] if t.get("meta") == "host" for cd in t["customdata"]]
    assert len(one_by_one) == 24 and all(cd[0] == "host" and cd[1].startswith("/c/demo/h/h100-n") for cd in one_by_one)
    degraded = html[html.index('id="degraded"'):html.index('id="down-ports"')]
    assert "h100-n15 mlx5_2" in degraded and "HDR" in degraded
