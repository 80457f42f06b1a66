"""`manage.py reencrypt_secrets`: every stored secret encrypted again with the first FIELD_ENCRYPTION_KEY.

The middle step of a key rotation (docs/security.md): FIELD_ENCRYPTION_KEY=new,old -> this ->
FIELD_ENCRYPTION_KEY=new. Safe to run again at any time.
"""
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils.translation import ngettext

from jobs.models import ClusterProfile


class Command(BaseCommand):
    help = "Encrypt every cluster profile's SSH key again with the first FIELD_ENCRYPTION_KEY (key rotation)."

    def handle(self, *args, **opts):
        with transaction.atomic():
            profiles = list(ClusterProfile.objects.select_for_update().only("pk", "private_key"))
            for profile in profiles:
                # update() encrypts with the first key; no save(), so no other field is written.
                ClusterProfile.objects.filter(pk=profile.pk).update(private_key=profile.private_key)
        self.stdout.write(ngettext("%(count)d cluster profile re-encrypted with the first FIELD_ENCRYPTION_KEY.",
                                   "%(count)d cluster profiles re-encrypted with the first FIELD_ENCRYPTION_KEY.",
                                   len(profiles)) % {"count": len(profiles)})
