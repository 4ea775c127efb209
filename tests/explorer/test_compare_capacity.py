"""The compare pages (every attribute change, the bandwidth line, a host against its layout's norm,
pickers never empty) and the capacity page (table, CSV, signed read-only link, NIC roles, the host
page's NVLink figure).

Hosts are real captures (the mooncake 8x NV18 topo -m and its ibstat); the "after" reports and the
odd hosts are SYNTHETIC edits of that ibstat, each named by what it changes."""

from __future__ import annotations

import csv
import io
import json
import re
import time
from unittest import mock

import pytest
from django.core import signing
from django.urls import reverse

from apps.explorer import capacity as capacity_page
from apps.ingest import access
from apps.ingest import selectors as ingest
from tests.explorer import helpers as h

pytestmark = pytest.mark.django_db


def synthetic_rate_200() -> str:
    """SYNTHETIC: every 400G port of the real ibstat trained at 200 Gb/s."""
    return h.read(h.IBSTAT).replace("Rate: 400\n", "Rate: 200\n")


def text_of(html: str, element_id: str, end_tag: str = "</div>") -> str:
    start = html.index(f'id="{element_id}"')
    end = html.index(end_tag, start)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html[start:end])).replace("&gt;", ">")


def test_host_compare_names_every_port_and_the_bandwidth_before_and_after(signed_in):
    c = h.cluster()
    a = h.standard_host(c, "node-a", collected_at="2025-01-01T00:00:00Z")
    b = h.snapshot(c, "node-a", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": synthetic_rate_200()},
                   collected_at="2025-01-02T00:00:00Z")
    html = signed_in.get(reverse("explorer:compare", args=["lab", "node-a"])).content.decode()
    summary = text_of(html, "diff-summary")
    assert "8 ports Active, 400 Gb/s -> Active, 200 Gb/s: mlx5_0, mlx5_3..mlx5_6, mlx5_9..mlx5_11" in summary
    bandwidth = html[html.index('id="bandwidth-before-after"'):]
    bandwidth = bandwidth[:bandwidth.index('id="runs-before-after"')]
    before = {p["nodes"]: p["busbw_gbs"] for p in ingest.get_snapshot_doc(a.pk)["estimate"]["points"]}
    after = {p["nodes"]: p["busbw_gbs"] for p in ingest.get_snapshot_doc(b.pk)["estimate"]["points"]}
    assert f"at 8 nodes: {before[8]:.1f} -&gt; {after[8]:.1f} GB/s" in bandwidth
    assert "to the network each" in bandwidth  # the per-GPU figures


@pytest.fixture
def fleet(db):
    """Two hosts of one layout and a SYNTHETIC odd one out (mlx5_0 Down)."""
    c = h.cluster()
    h.standard_host(c, "node-a")
    h.standard_host(c, "node-b")
    odd = h.snapshot(c, "node-c", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": h.ibstat_port_down("mlx5_0")})
    return c, odd


def test_an_odd_host_compares_with_its_layouts_norm(signed_in, fleet):
    url = reverse("explorer:compare", args=["lab", "node-c"])
    html = signed_in.get(url).content.decode()  # one snapshot: the page offers the norm
    assert f'href="{url}?with=node-a' in html and "Compare with the layout's norm (host node-a)" in html
    assert "an odd one out" in html
    html = signed_in.get(f"{url}?with=node-a").content.decode()
    assert "Compare node-c with node-a" in html and "What differs from node-a" in html
    assert "mlx5_0: port Active, 400 Gb/s -&gt; Down" in text_of(html, "diff-summary").replace(">", "&gt;")
    # the norm host itself is offered another host of its layout
    html = signed_in.get(reverse("explorer:compare", args=["lab", "node-a"])).content.decode()
    assert "host node-b" in html and "its platform&#x27;s norm layout" in html


def test_an_unknown_reference_host_says_so_and_compares_snapshots(signed_in, fleet):
    resp = signed_in.get(reverse("explorer:compare", args=["lab", "node-c"]) + "?with=nope", follow=True)
    assert resp.status_code == 200 and "No host &#x27;nope&#x27;" in resp.content.decode()


def test_cluster_compare_opens_on_the_last_change_with_both_pickers_filled(signed_in):
    c = h.cluster()
    h.standard_host(c, "node-a", collected_at="2025-01-01T00:00:00Z")
    h.snapshot(c, "node-a", {"nvidia_smi_topo": h.read(h.TOPO), "ibstat": synthetic_rate_200()},
               collected_at="2025-01-02T00:00:00Z")
    h.standard_host(c, "node-z", collected_at="2025-01-03T00:00:00Z")  # a host joining after the change
    html = signed_in.get(reverse("explorer:cluster-compare", args=["lab"])).content.decode()
    assert 'name="a" value="2025-01-01T00:00:00"' in html
    b_value = re.search(r'name="b" value="([^"]*)"', html).group(1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", b_value)
    rows = html[html.index("<tbody>"):]
    assert rows.index("node-a") < rows.index("node-z")  # the change first
    assert "8 ports Active, 400 Gb/s -&gt; Active, 200 Gb/s" in rows and "Expected all-reduce busbw" in rows


@pytest.fixture
def two_layouts(db):
    c = h.cluster()
    a = h.standard_host(c, "node-a")
    h.standard_host(c, "node-b")
    b = h.snapshot(c, "della", {"nvidia_smi_topo": h.read(h.TOPO_DELLA)})
    return c, a, b


def table_cells(html: str) -> list[list[str]]:
    table = html[html.index('id="capacity-table"'):]
    body = table[table.index("<tbody>"):table.index("</tbody>")]
    return [[re.sub(r"<[^>]+>|\s+", " ", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def test_capacity_table_and_its_csv_are_the_same_figures(signed_in, two_layouts):
    c, a, b = two_layouts
    url = f"/capacity/?a={a.pk}&b={b.pk}"
    html = signed_in.get(url).content.decode()
    cells = table_cells(html)
    resp = signed_in.get(url + "&format=csv")
    assert resp["Content-Type"].startswith("text/csv") and "attachment" in resp["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(resp.content.decode())))
    assert rows[0] == [label for _, label in capacity_page.TABLE_COLUMNS]
    assert len(rows) - 1 == len(cells)
    points = ingest.get_snapshot_doc(a.pk)["estimate"]["points"]
    a_rows = [r for r in rows[1:] if r[0] == "A"]
    assert [(int(r[8]), float(r[9]), r[10]) for r in a_rows] == [(p["nodes"], p["busbw_gbs"], p["algorithm"])
                                                                   for p in points]
    assert a_rows[0][4] == "2"  # node-a and node-b share the layout
    assert a_rows[0][7] == ("8x 400 Gb/s InfiniBand (mlx5_0, mlx5_3..mlx5_6, mlx5_9..mlx5_11); "
                            "2x 100 Gb/s Ethernet (mlx5_7, mlx5_8)")
    for row, cell in zip(rows[1:], cells):  # column for column (the page writes GB/s after the figure)
        assert cell[1] == row[1] and cell[8] == (row[8] or "-") and cell[9].startswith(row[9] or "-")


def test_capacity_names_the_nic_roles_it_assumed_with_user_overrides(signed_in, user, two_layouts):
    from apps.ingest.nic_roles import set_roles

    c, a, b = two_layouts
    html = signed_in.get(f"/capacity/?a={a.pk}").content.decode()
    assert "2x 100 Gb/s Ethernet (mlx5_7, mlx5_8)" in text_of(html, "capacity-roles-a", "</td>")
    set_roles(a, {"mlx5_7": "storage"}, user)  # the user says mlx5_7 carries storage traffic
    a.refresh_from_db()
    roles = text_of(signed_in.get(f"/capacity/?a={a.pk}").content.decode(), "capacity-roles-a", "</td>")
    assert "8x 400 Gb/s InfiniBand" in roles and "1x 100 Gb/s Ethernet (mlx5_8)" in roles
    assert "not counted (storage / management): mlx5_7" in roles
    assert f"mlx5_7 : storage (set by ada on {a.nic_roles['mlx5_7']['at'][:10]})" in roles


def test_capacity_states_the_nvlink_figure_the_host_page_draws(signed_in, two_layouts):
    c, a, b = two_layouts
    host = signed_in.get(reverse("explorer:host", args=["lab", "node-a"])).content.decode()
    fig = json.loads(re.search(r'<script id="fig-host-data" type="application/json"[^>]*>(.*?)</script>', host,
                               re.S).group(1))
    label = next(x["text"] for x in fig["layout"]["annotations"] if str(x.get("text", "")).startswith("NVSwitch:"))
    gbs = re.search(r"([\d.]+) GB/s per direction", label).group(1)
    page = text_of(signed_in.get(f"/capacity/?a={a.pk}").content.decode(), "capacity-layout-a")
    assert f"NV18 per GPU into the NVSwitch: {gbs} GB/s per direction" in page
    ring = ingest.get_snapshot_doc(a.pk)["estimate"]["b_gpu_gbs"]
    assert f"= {ring:.1f} GB/s" in page  # NCCL's ring plan, named as such


def test_capacity_share_link_opens_read_only_without_an_account(client, signed_in, two_layouts):
    c, a, b = two_layouts
    html = signed_in.get(f"/capacity/?a={a.pk}&b={b.pk}").content.decode()
    share_url = re.search(r'id="capacity-share">.*?value="([^"]+)"', html, re.S).group(1)
    path = share_url.split("testserver", 1)[1]
    client.logout()
    shared = client.get(path)
    body = shared.content.decode()
    assert shared.status_code == 200 and 'id="capacity-shared"' in body and "shared by ada" in body
    assert 'name="a"' not in body and table_cells(body) == table_cells(html)
    csv_resp = client.get(path + "?format=csv")
    assert csv_resp.status_code == 200 and csv_resp.content.decode().count("\n") == len(table_cells(html)) + 1


def test_capacity_share_link_refuses_tampered_and_expired_tokens(client, user, two_layouts):
    c, a, b = two_layouts
    chosen = [{"key": "a", "snap": a}]
    token = capacity_page.share_token(chosen, user)
    payload, signature = token.rsplit(":", 1)
    forged = signing.dumps({"l": [["a", b.pk]], "by": "ada"}, salt="another-salt")
    for bad in (f"{payload}:{signature[::-1]}", forged, token[:-3]):
        resp = client.get(reverse("explorer:capacity-shared", args=[bad]))
        assert resp.status_code == 410 and "not valid" in resp.content.decode()
    with mock.patch("django.core.signing.time.time", return_value=time.time() - 15 * 86400):
        old = capacity_page.share_token(chosen, user)
    resp = client.get(reverse("explorer:capacity-shared", args=[old]))
    assert resp.status_code == 410 and "expired" in resp.content.decode()
    assert client.get(reverse("explorer:capacity-shared", args=[token])).status_code == 200


def test_capacity_share_links_are_for_editors(client, django_user_model, two_layouts):
    c, a, b = two_layouts
    django_user_model.objects.create_user("vic", password="pw-not-secret")
    access.grant(cluster=c, role=access.VIEWER, username="vic")
    client.login(username="vic", password="pw-not-secret")
    html = client.get(f"/capacity/?a={a.pk}").content.decode()
    assert 'id="capacity-share"' not in html and "Read-only links are for editors" in html
