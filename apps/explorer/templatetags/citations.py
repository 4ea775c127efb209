"""``{{ finding.source|cite }}``: a rule's source with every citation a link to its public origin
(``apps/domain/citations.py``); what is not a known citation stays escaped text."""

from __future__ import annotations

from functools import lru_cache

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe

from apps.domain.citations import cite_parts

register = template.Library()


@register.filter
def cite(source) -> str:
    return _cited("" if source is None else str(source))


@lru_cache(maxsize=1024)  # pure: a page repeats the few sources of the rules it shows
def _cited(text: str) -> str:
    return mark_safe("".join(
        format_html('<a class="cite" href="{}" rel="noopener noreferrer" target="_blank">{}</a>', url, text)
        if url else conditional_escape(text) for text, url in cite_parts(text)))
