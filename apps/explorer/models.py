"""Explorer tables: read-only share links of a path view.

A ``ShareLink`` pins the two GPU endpoints to snapshots (``"<snapshot id>/GPU<i>"``) so the
link shows the same path the sender saw, even after newer reports arrive. The URL carries
``signing.dumps(pk)`` (Django's signing, salt ``topoweb.sharelink``); it is honoured while the
signature is younger than ``SHARE_LINK_MAX_AGE_DAYS`` and the row is not revoked.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ShareLink(models.Model):
    """A read-only link to one path view that works without an account."""

    src = models.CharField(max_length=300)  # "<snapshot id>/GPU<i>"
    dst = models.CharField(max_length=300)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                                   related_name="share_links")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        state = " (revoked)" if self.revoked_at else ""
        return f"share {self.pk}: {self.src} -> {self.dst}{state}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
