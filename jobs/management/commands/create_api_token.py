"""`manage.py create_api_token <username>`: issue an API token and print only its key.

Only the key goes to stdout, so scripts can capture it: `KEY=$(python manage.py create_api_token alice)`.
The key is shown this once; the database keeps only its SHA-256.
"""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from jobs.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token for a user and print its key (shown once; only its hash is stored)."

    def add_arguments(self, parser):
        parser.add_argument("username", help="the user the token acts as")

    def handle(self, *args, username: str, **options):
        User = get_user_model()
        try:
            user = User.objects.get(**{User.USERNAME_FIELD: username})
        except User.DoesNotExist:
            raise CommandError(f"No user named {username!r}. Create the user first (admin or createsuperuser).") from None
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive: a token for it would be refused. Activate the user first.")
        _, key = ApiToken.issue(user)
        self.stdout.write(key)
