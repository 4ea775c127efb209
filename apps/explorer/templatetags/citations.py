"""``{{ finding.source|cite }}``: a rule's source with every citation a link to its public origin
(``apps/domain/citations.py``); what is not a known citation stays escaped text."""

from __future__ import annotations

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe

from apps.domain.citations import cite_parts

register = template.Library()


@register.filter
def cite(source) -> str:
    return mark_safe("".join(
        format_html('<a class="cite" href="{}" rel="noopener noreferrer" target="_blank">{}</a>', url, text)
        if url else conditional_escape(text) for text, url in cite_parts(source)))
