"""The cluster page's host table, one ``<tr>`` per host, built in Python.

A 1,024-host cluster made the template engine resolve some 37,000 variables for this table
(more than a second); these few string joins produce the same markup in a few milliseconds.
Every value that came from a report or a person (host names, GPU models, NIC rates, differences)
goes through ``escape``.
"""

from __future__ import annotations

from urllib.parse import quote

from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince

_SAFE = "!$&'()*+,;=~:@"  # what Django's reverse() leaves unquoted in a path segment


def _host_url(base: str, hostname: str) -> str:
    return escape(f"{base}h/{quote(str(hostname), safe=_SAFE)}/")


def _diff_list(lines, css: str = "diff-lines") -> str:
    return f'<ul class="{css}">' + "".join(f"<li>{escape(line)}</li>" for line in lines) + "</ul>"


def _compared(r: dict, base: str) -> str:
    if r["odd"]:
        norm = r["norm_host"]
        return (_diff_list(r["odd"]) + f'\n      <span class="small muted">norm: <a href="{_host_url(base, norm)}">'
                f"{escape(norm)}</a></span>")
    if r["status"] == "norm":
        return '<span class="muted">matches the norm of its platform</span>'
    if r["status"] == "alone":
        return '<span class="muted">only host of its platform</span>'
    text = f'<span class="muted">no majority layout among the {escape(r["platform_size"])} hosts of its platform'
    if r["differs"]:
        norm = r["norm_host"]
        return (text + f'; differs from <a href="{_host_url(base, norm)}">{escape(norm)}</a> in:</span>'
                + _diff_list(r["differs"], "diff-lines muted"))
    return text + "</span>"


def host_rows_html(rows: list[dict], cluster_name: str) -> SafeString:
    """``rows``: the cluster view's row dicts (``s`` the snapshot row, ``group``, ``status``,
    ``odd``, ``differs``, ``norm_host``, ``platform_size``, ``gpu_model``, ``nics``, ``nic_rates``,
    ``score``)."""
    base = reverse("explorer:cluster", args=[cluster_name])
    now = timezone.now()
    out = []
    for r in rows:
        s = r["s"]
        name = s.host.hostname
        odd = bool(r["odd"])
        bad = bool(s.crit_count or s.high_count)
        when = timezone.localtime(s.collected_at) if timezone.is_aware(s.collected_at) else s.collected_at
        sev = "".join(f'<span class="sev sev-{k}">{k} {n}</span> ' for k, n in s.severity_counts.items() if n)
        out.append(
            f'<tr class="{"odd-one" if odd else ""}" data-odd="{int(odd)}" data-bad="{int(bad)}">\n'
            f'  <td data-v="{escape(name)}"><a href="{_host_url(base, name)}">{escape(name)}</a></td>\n'
            f'  <td data-v="{r["group"]}">{r["group"]}</td>\n'
            f'  <td data-v="{s.gpu_count}">{s.gpu_count}</td>\n'
            f'  <td>{escape(r["gpu_model"])}</td>\n'
            f'  <td data-v="{s.nic_count}">{escape(r["nics"])}</td>\n'
            f'  <td>{escape(r["nic_rates"])}</td>\n'
            f'  <td data-v="{r["score"]}">{sev}</td>\n'
            f'  <td data-v="{when.isoformat()}">{when:%Y-%m-%d %H:%M} <span class="muted">'
            f'({escape(timesince(s.collected_at, now))} ago)</span></td>\n'
            f'  <td>{_compared(r, base)}</td>\n'
            "</tr>\n")
    return mark_safe("".join(out))
