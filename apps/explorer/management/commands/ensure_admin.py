"""python manage.py ensure_admin: on first run, create a local admin and print its generated password."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the local 'admin' account with a generated password if no user exists yet."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options) -> None:
        User = get_user_model()
        if User.objects.exists():
            self.stdout.write(
                f"Users already exist; sign in with yours (reset a password with: "
                f".venv/bin/python manage.py changepassword {username})."
            )
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        bar = "=" * 64
        self.stdout.write(
            f"\n{bar}\n  topoweb admin account created\n  user:     {username}\n  password: {password}\n"
            f"  sign in at http://127.0.0.1:8000/ (this password is shown only once)\n{bar}\n"
        )
