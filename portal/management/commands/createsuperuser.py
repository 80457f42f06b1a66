"""`manage.py createsuperuser`: Django's, except that `--noinput` with DJANGO_SUPERUSER_PASSWORD
checks the password as every other place does (AUTH_PASSWORD_VALIDATORS). Django checks it only
when it asks on a terminal, and docs/deploy.md gives the non-interactive form for scripts."""
from __future__ import annotations

import os

from django.contrib.auth.management.commands import createsuperuser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError


class Command(createsuperuser.Command):
    def handle(self, *args, **options):
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
        if not options["interactive"] and password is not None:
            check_password(password, self.UserModel, options)
        return super().handle(*args, **options)


def check_password(password: str, user_model, options: dict) -> None:
    """CommandError with the validators' words when `password` is refused for the user being made
    (its user name and email, from the options or DJANGO_SUPERUSER_*, as Django reads them)."""
    fields = {}
    for name in {user_model.USERNAME_FIELD, user_model.get_email_field_name()}:
        value = options.get(name) or os.environ.get(f"DJANGO_SUPERUSER_{name.upper()}")
        if value:
            fields[name] = value
    try:
        validate_password(password, user_model(**fields))
    except ValidationError as exc:
        raise CommandError("DJANGO_SUPERUSER_PASSWORD: " + " ".join(exc.messages)) from None
