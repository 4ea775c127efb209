"""Explorer writes: share links (create, verify, revoke)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.utils import timezone

from apps.explorer.models import ShareLink

SALT = "topoweb.sharelink"


def max_age() -> timedelta:
    return timedelta(days=settings.SHARE_LINK_MAX_AGE_DAYS)


def create_share_link(*, src: str, dst: str, user) -> tuple[ShareLink, str]:
    """Store a link to the path ``src`` -> ``dst`` (snapshot-pinned refs) and return it with its token."""
    link = ShareLink.objects.create(src=src, dst=dst, created_by=user)
    return link, signing.dumps(link.pk, salt=SALT, compress=True)


def resolve_share_token(token: str) -> tuple[ShareLink | None, str]:
    """(link, "") for a valid, unexpired, unrevoked token; else (None, reason for the visitor)."""
    try:
        pk = signing.loads(token, salt=SALT, max_age=max_age())
    except signing.SignatureExpired:
        return None, f"This link has expired (links last {settings.SHARE_LINK_MAX_AGE_DAYS} days). Ask for a new one."
    except signing.BadSignature:
        return None, "This link is not valid. Check that it was copied whole."
    link = ShareLink.objects.filter(pk=pk).first()
    if link is None:
        return None, "This link no longer exists."
    if link.revoked_at is not None:
        return None, "This link was revoked by the person who shared it."
    return link, ""


def revoke_share_link(*, link_id: int, user) -> ShareLink | None:
    link = ShareLink.objects.filter(pk=link_id, created_by=user).first()
    if link is not None and link.revoked_at is None:
        link.revoked_at = timezone.now()
        link.save(update_fields=["revoked_at"])
    return link
