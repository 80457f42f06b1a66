"""Webhook deliveries in the admin: read-only (a log of what was sent), filtered by state and event.
Signing secrets are not in the admin at all: nobody but their owner ever sees one, once."""
from __future__ import annotations

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from jobs.admin.base import LogAdmin
from jobs.models import WebhookDelivery


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(LogAdmin):
    list_display = ("created_at", "user", "event", "url", "state", "last_status", "attempts", "duration_ms")
    list_filter = ("state", "event", "created_at")
    date_hierarchy = "created_at"
    search_fields = ("url", "user__username", "=id")
    fields = ("id", "user", "event", "url", "job", "booking", "state", "attempts", "last_status", "last_error",
              "duration_ms", "next_attempt_at", "created_at", "delivered_at", "payload_text")
    readonly_fields = fields
    list_select_related = ("user",)
    list_per_page = 100

    @admin.display(description=_("payload"))
    def payload_text(self, obj: WebhookDelivery) -> str:
        return self.json_block(obj.payload)
