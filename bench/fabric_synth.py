"""A synthetic three-tier InfiniBand fat tree written as ``ibnetdiscover`` text, for the parser and graph benchmarks.

Synthetic, not a capture: the text says so in its first comment line. Defaults: 40 pods of 25
leaves (16 HCAs each, 20 uplinks, one to every spine of the pod) and 20 spines (25 down, 10 up),
and 200 core switches (40 down, one per pod): 2,000 switches, 16,000 HCAs, 44,000 links, 4X NDR.
Hosts carry 8 HCAs each (``node00017 mlx5_3``); GUIDs are made up.

    >>> text = synthetic_ibnetdiscover(pods=2, leaves_per_pod=2, spines_per_pod=2, cores=2, hcas_per_leaf=4,
    ...                                core_links_per_spine=1)
    >>> text.splitlines()[0]
    '# synthetic fabric (topoweb bench/fabric_synth.py): 10 switches, 16 HCAs'
"""

from __future__ import annotations

LEAF, SPINE, CORE, HCA = 0x0800_0000_0000_0000, 0x0900_0000_0000_0000, 0x0A00_0000_0000_0000, 0x0B00_0000_0000_0000


def _hex(value: int) -> str:
    return f"{value:016x}"


def _switch(guid: int, name: str, lid: int, ports: int, lines: list[str]) -> None:
    lines += ["", "vendid=0x2c9", "devid=0xd2f2", f"sysimgguid=0x{_hex(guid)}",
              f"switchguid=0x{_hex(guid)}({_hex(guid)})",
              f'Switch\t{ports} "S-{_hex(guid)}"\t\t# "{name}" enhanced port 0 lid {lid} lmc 0']


def synthetic_ibnetdiscover(pods: int = 40, leaves_per_pod: int = 25, spines_per_pod: int = 20, cores: int = 200,
                            hcas_per_leaf: int = 16, core_links_per_spine: int = 10, hcas_per_host: int = 8) -> str:
    """The ibnetdiscover topology text of the fat tree described in the module docstring."""
    leaves, spines = pods * leaves_per_pod, pods * spines_per_pod
    n_hcas = leaves * hcas_per_leaf
    lid = {("leaf", i): 1 + i for i in range(leaves)}
    lid.update({("spine", i): 1 + leaves + i for i in range(spines)})
    lid.update({("core", i): 1 + leaves + spines + i for i in range(cores)})
    hca_lid = 1 + leaves + spines + cores
    lines = [f"# synthetic fabric (topoweb bench/fabric_synth.py): {leaves + spines + cores} switches, {n_hcas} HCAs",
             "#", f"# Initiated from node {_hex(HCA)} port {_hex(HCA)}"]
    rate = "4xNDR"

    def hca_desc(c: int) -> str:
        return f"node{c // hcas_per_host:05d} mlx5_{c % hcas_per_host}"

    def core_of(spine_in_pod: int, k: int) -> int:
        return (spine_in_pod * core_links_per_spine + k) % cores

    for i in range(leaves):
        pod, li = divmod(i, leaves_per_pod)
        _switch(LEAF + i, f"leaf-{pod:02d}-{li:02d}", lid["leaf", i], hcas_per_leaf + spines_per_pod, lines)
        for s in range(hcas_per_leaf):
            c = i * hcas_per_leaf + s
            g = _hex(HCA + c)
            lines.append(f'[{s + 1}]\t"H-{g}"[1]({g}) \t\t# "{hca_desc(c)}" lid {hca_lid + c} {rate}')
        for j in range(spines_per_pod):
            sp = pod * spines_per_pod + j
            lines.append(f'[{hcas_per_leaf + j + 1}]\t"S-{_hex(SPINE + sp)}"[{li + 1}]\t\t'
                         f'# "spine-{pod:02d}-{j:02d}" lid {lid["spine", sp]} {rate}')
    core_ports: dict[int, list[tuple[int, int]]] = {core: [] for core in range(cores)}  # core -> [(spine, k)]
    for sp in range(spines):
        for k in range(core_links_per_spine):
            core_ports[core_of(sp % spines_per_pod, k)].append((sp, k))
    port_at = {(core, sp, k): n + 1 for core, items in core_ports.items() for n, (sp, k) in enumerate(items)}
    for sp in range(spines):
        pod, j = divmod(sp, spines_per_pod)
        _switch(SPINE + sp, f"spine-{pod:02d}-{j:02d}", lid["spine", sp], leaves_per_pod + core_links_per_spine, lines)
        for li in range(leaves_per_pod):
            i = pod * leaves_per_pod + li
            lines.append(f'[{li + 1}]\t"S-{_hex(LEAF + i)}"[{hcas_per_leaf + j + 1}]\t\t'
                         f'# "leaf-{pod:02d}-{li:02d}" lid {lid["leaf", i]} {rate}')
        for k in range(core_links_per_spine):
            core = core_of(j, k)
            lines.append(f'[{leaves_per_pod + k + 1}]\t"S-{_hex(CORE + core)}"[{port_at[core, sp, k]}]\t\t'
                         f'# "core-{core:03d}" lid {lid["core", core]} {rate}')
    for core in range(cores):
        _switch(CORE + core, f"core-{core:03d}", lid["core", core], len(core_ports[core]), lines)
        for n, (sp, k) in enumerate(core_ports[core]):
            pod, j = divmod(sp, spines_per_pod)
            lines.append(f'[{n + 1}]\t"S-{_hex(SPINE + sp)}"[{leaves_per_pod + k + 1}]\t\t'
                         f'# "spine-{pod:02d}-{j:02d}" lid {lid["spine", sp]} {rate}')
    for c in range(n_hcas):
        i, s = divmod(c, hcas_per_leaf)
        pod, li = divmod(i, leaves_per_pod)
        g = _hex(HCA + c)
        lines += ["", "vendid=0x2c9", "devid=0x1021", f"sysimgguid=0x{g}", f"caguid=0x{g}",
                  f'Ca\t1 "H-{g}"\t\t# "{hca_desc(c)}"',
                  f'[1]({g}) \t"S-{_hex(LEAF + i)}"[{s + 1}]\t\t# lid {hca_lid + c} lmc 0 "leaf-{pod:02d}-{li:02d}" '
                  f'lid {lid["leaf", i]} {rate}']
    return "\n".join(lines) + "\n"
