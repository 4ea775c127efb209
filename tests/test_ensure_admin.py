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


@pytest.mark.django_db
def test_reset_prints_a_new_password_that_works_and_the_old_one_stops() -> None:
    first = io.StringIO()
    call_command("ensure_admin", stdout=first)
    old = re.search(r"password: (\S+)", first.getvalue()).group(1)
    later = io.StringIO()
    call_command("ensure_admin", stdout=later)
    assert "ensure_admin --reset" in later.getvalue()  # a second run says how to get back in
    out = io.StringIO()
    call_command("ensure_admin", "--reset", stdout=out)
    new = re.search(r"password: (\S+)", out.getvalue()).group(1)
    assert new != old and "password reset" in out.getvalue()
    assert authenticate(username="admin", password=new) is not None
    assert authenticate(username="admin", password=old) is None
    call_command("ensure_admin", "--reset", "--username", "ops", stdout=io.StringIO())
    assert get_user_model().objects.get(username="ops").is_superuser


@pytest.mark.django_db
def test_the_login_page_says_how_to_get_in(client) -> None:
    body = client.get("/accounts/login/").content.decode()
    assert "ensure_admin --reset" in body
