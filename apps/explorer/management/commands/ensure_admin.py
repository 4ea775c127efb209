"""python manage.py ensure_admin [--username U] [--reset]

On first run (no user yet) create a local superuser and print its generated password; later
runs leave users alone and say how to get in. ``--reset`` gives the account a new generated
password (creating it as a superuser when missing) and prints it: the way back in when the
password ``make run`` printed is lost.
"""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the local 'admin' account with a generated password if no user exists yet (--reset: new password)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--reset", action="store_true",
                            help="set a new generated password for USERNAME (created as a superuser if missing)")

    def handle(self, *args, username: str, reset: bool, **options) -> None:
        User = get_user_model()
        if reset:
            user = User.objects.filter(username=username).first()
            password = secrets.token_urlsafe(12)
            if user is None:
                User.objects.create_superuser(username=username, email="", password=password)
            else:
                user.set_password(password)
                user.is_active = True
                user.save(update_fields=["password", "is_active"])
            self._print(username, password, "password reset" if user else "admin account created")
            return
        if User.objects.exists():
            self.stdout.write(
                f"Users already exist; sign in with yours. Lost the password? "
                f"`.venv/bin/python manage.py ensure_admin --reset` prints a new one for '{username}' "
                f"(or `manage.py changepassword USER`)."
            )
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        self._print(username, password, "admin account created")

    def _print(self, username: str, password: str, what: str) -> None:
        bar = "=" * 64
        self.stdout.write(
            f"\n{bar}\n  topoweb {what}\n  user:     {username}\n  password: {password}\n"
            f"  sign in at http://127.0.0.1:8000/ (this password is shown only once)\n{bar}\n"
        )
