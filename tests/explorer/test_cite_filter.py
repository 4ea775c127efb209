"""The ``cite`` template filter: known citations become links, the rest stays escaped text."""

from __future__ import annotations

from django.template import Context, Template

from apps.explorer.templatetags.citations import cite


def test_known_citations_are_links_and_unknown_ones_plain_text():
    html = str(cite("<b>x</b> [S999] foo.cc L3; connect.cc L985-990 [S10]"))
    assert html.startswith("&lt;b&gt;x&lt;/b&gt; [S999] foo.cc L3; ")  # escaped, no link
    assert html.count("<a ") == 3 and "[S999]</a>" not in html
    assert ('<a class="cite" href="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/transport/net_ib/connect.cc'
            '#L985-L990" rel="noopener noreferrer" target="_blank">L985-990</a>') in html


def test_the_filter_in_a_template_and_an_empty_source():
    out = Template("{% load citations %}{{ s|cite }}").render(Context({"s": "NCCL #465 [S41]"}))
    assert out == ('<a class="cite" href="https://github.com/NVIDIA/nccl/issues/465" rel="noopener noreferrer" '
                   'target="_blank">NCCL #465</a> <a class="cite" href="https://github.com/NVIDIA/nccl/issues/465" '
                   'rel="noopener noreferrer" target="_blank">[S41]</a>')
    assert str(cite(None)) == "" and str(cite("")) == ""
