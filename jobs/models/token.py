from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class ApiToken(models.Model):
    """A key for the JSON API. Only its SHA-256 is stored; the key is shown once when created."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8, help_text=_("First characters of the key, to tell tokens apart."))
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return f"{self.user} {self.prefix}…"

    @staticmethod
    def hash(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, user) -> tuple["ApiToken", str]:
        key = secrets.token_urlsafe(32)
        return cls.objects.create(user=user, key_hash=cls.hash(key), prefix=key[:8]), key

    @classmethod
    def user_for(cls, key: str):
        token = cls.objects.select_related("user").filter(key_hash=cls.hash(key), user__is_active=True).first()
        return token.user if token else None
