"""``{% load verdicts %}``: the one-sentence verdicts of the path and compare pages
(``apps.domain.verdict``), computed from what those views already put in the context."""

from __future__ import annotations

from django import template

from apps.domain import verdict as dv

register = template.Library()


@register.simple_tag
def path_verdict(result) -> str:
    return (dv.path_sentence(result) or "") if result else ""


@register.simple_tag
def compare_verdict(doc_a, doc_b) -> str:
    return (dv.compare_sentence(doc_a, doc_b) or "") if doc_a and doc_b else ""
