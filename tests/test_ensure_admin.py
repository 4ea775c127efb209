"""First `make run` creates an admin with a printed password; later runs leave users alone."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command


@pytest.mark.django_db
def test_first_run_creates_admin_with_printed_password() -> None:
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    password = re.search(r"password: (\S+)", out.getvalue()).group(1)
    assert authenticate(username="admin", password=password) is not None
    again = io.StringIO()
    call_command("ensure_admin", stdout=again)
    assert "already exist" in again.getvalue()
    assert get_user_model().objects.count() == 1
