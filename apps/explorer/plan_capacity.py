"""Plans on the capacity page: their options in the layout pickers and their chart entries.

A plan's entry is the capacity page's ``layout_entry`` of its base snapshot with the plan's
after-document: legend ``A: plan: <name>``, no measured runs (nothing was measured on a plan),
never shared by a capacity link (those sign snapshot ids), no hosts counted.
"""

from __future__ import annotations

from apps.ingest import access, plans


def options(user) -> list[dict]:
    """The plans (with a base snapshot) of the clusters ``user`` may view, as picker options."""
    return [o for o in plans.plan_capacity_options(access.visible_cluster_ids(user)) if o["hostname"]]


def entry(key: str, ref: str, user) -> dict | None:
    """The chart entry of ``ref`` = ``plan:<id>`` for ``user``; None when it is not a plan they may view."""
    from apps.explorer.capacity import layout_entry  # the capacity page imports this module

    found = plans.plan_capacity_ref(ref, user)
    if found is None:
        return None
    name, doc = found
    plan = plans.plan_for(int(ref.removeprefix("plan:")), user)
    if plan.base_snapshot is None:
        return None
    e = layout_entry(key, ref, plan.base_snapshot, doc)
    e.update(name=f"{key.upper()}: {name} ({plans.PLAN_LABEL})", plan=True, option_id=ref, hosts=0)
    return e
