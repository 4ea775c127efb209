"""apps/domain/citations.py: every citation a rule's source makes resolves to a public URL; anything
else stays text (no broken link)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import apps.domain.fabric_rules as fabric_rules
import apps.domain.findings as findings_pkg
import apps.domain.fleet_rules as fleet_rules
from apps.domain.citations import NCCL_FILES, SOURCES, cite_parts, unresolved
from apps.domain.findings.base import Rule


def all_rules() -> list[Rule]:
    mods = [importlib.import_module(f"apps.domain.findings.{m.name}")
            for m in pkgutil.iter_modules(findings_pkg.__path__)]
    seen: dict[str, Rule] = {}
    for mod in [*mods, fabric_rules, fleet_rules]:
        for value in vars(mod).values():
            if isinstance(value, Rule):
                seen.setdefault(value.id, value)
    return list(seen.values())


RULES = all_rules()


def test_the_rules_are_found():
    ids = {r.id for r in RULES}
    assert {"F04", "G01", "G02", "P02", "X01", "L04", "L08"} <= ids and len(ids) >= 45


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_every_citation_of_a_rule_resolves(rule):
    parts = cite_parts(rule.source)
    assert "".join(t for t, _ in parts) == rule.source  # nothing lost or added
    assert unresolved(rule.source) == []
    for _, url in parts:
        assert url is None or url.startswith("https://")


def test_every_source_id_a_rule_cites_is_in_the_list():
    import re
    cited = {m for r in RULES for m in re.findall(r"\[(S\d+[a-z]?)\]", r.source)}
    assert cited and cited <= set(SOURCES), cited - set(SOURCES)


def links(source: str) -> dict[str, str]:
    return {t: u for t, u in cite_parts(source) if u}


def test_nccl_lines_link_to_the_file_at_the_tag():
    got = links("connect.cc L985-990, L1028-1038 [S10]")
    base = "https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/transport/net_ib/connect.cc"
    assert got == {"connect.cc": base, "L985-990": base + "#L985-L990", "L1028-1038": base + "#L1028-L1038",
                   "[S10]": base}


def test_a_short_name_nccl_has_twice_follows_its_clause():
    # init.cc beside [S8] is the IB transport's; alone it is NCCL's communicator init (src/init.cc)
    assert links("NCCL init.cc L363 [S8]")["L363"].endswith("/src/transport/net_ib/init.cc#L363")
    assert links("NCCL init.cc L1436-1443 (bwIntra/bwInter)")["L1436-1443"] == \
        "https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/init.cc#L1436-L1443"
    assert links("connect.cc L95-113 (rings)")["connect.cc"].endswith("/src/graph/connect.cc")


def test_an_older_release_and_a_semicolon_in_parentheses():
    got = links("paths.cc L356-362 (v2.30; changed in 2.23) vs v2.21.5 L279-295 [S2]")
    assert got["L356-362"].endswith("/blob/v2.30.7-1/src/graph/paths.cc#L356-L362")
    assert got["L279-295"] == "https://github.com/NVIDIA/nccl/blob/v2.21.5-1/src/graph/paths.cc#L279-L295"


def test_issue_numbers_and_domain_sections():
    got = links("NCCL #426, #769 [S45][S46]; pytorch #35710")
    assert got["NCCL #426"] == "https://github.com/NVIDIA/nccl/issues/426"
    assert got["#769"] == "https://github.com/NVIDIA/nccl/issues/769"
    assert got["pytorch #35710"] == "https://github.com/pytorch/pytorch/issues/35710"
    x01 = links("domain.md section 1 evaluation notes (prefer sysfs ancestry) and 4.1 joins")
    assert x01["domain.md section 1 evaluation notes"].endswith("/src/graph/xml.cc#L748-L790")
    assert x01["4.1"].endswith("/src/misc/utils.cc#L27")


def test_unknown_references_stay_text():
    for text in ("[S999] and foo.cc L12", "domain.md section 9", "IBA Vol 1 14.2.5.6 PortInfo", "#12", "", None):
        assert all(u is None for _, u in cite_parts(text)), text
    assert unresolved("[S999]; foo.cc") == ["[S999]", "foo.cc"]


def test_the_nccl_file_map_names_real_paths():
    # the paths of git ls-tree -r v2.30.7-1 (src/graph, src/include, src/transport/net_ib, src/misc, src/init.cc)
    assert all(p.startswith("src/") and p.rsplit("/", 1)[-1] == k.rsplit("/", 1)[-1] for k, p in NCCL_FILES.items())
