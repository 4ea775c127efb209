"""``{% plans_block cluster %}``: the cluster page's list of plans (saved what-ifs)."""

from __future__ import annotations

from django import template

from apps.ingest import plans

register = template.Library()


@register.inclusion_tag("explorer/plan_block.html")
def plans_block(cluster) -> dict:
    return {"plans": list(plans.cluster_plans(cluster))}
