"""The admin's base class: every add, change and deletion goes to the audit log."""
from __future__ import annotations

import copy
import json

from django.contrib import admin
from django.utils.html import format_html
from django.utils.translation import gettext

from jobs import audit

#: longest text kept per value in an audit entry's details (a description or known_hosts can be long)
AUDIT_VALUE_LENGTH = 500


class AuditedAdmin(admin.ModelAdmin):
    """A ModelAdmin whose adds, changes and deletions go to the audit log.

    Actions are "<audit_name>.add", ".change", ".delete" (audit_name defaults to the model's
    name: "template", "quota"); a change records each changed field as {"from", "to"}. Fields
    named in `audit_secret_fields` are recorded only as changed, never with their value.
    Use it for any model: `class QuotaAdmin(AuditedAdmin): ...`.
    """

    audit_name: str = ""
    audit_secret_fields: tuple[str, ...] = ()

    def get_audit_name(self) -> str:
        return self.audit_name or self.model._meta.model_name

    def audit_values(self, obj) -> dict:
        """Every editable field's value (many-to-many included) as JSON-able text and numbers."""
        values = {}
        for field in obj._meta.get_fields():
            if not getattr(field, "editable", False) or not getattr(field, "concrete", False) or field.auto_created:
                continue
            if field.many_to_many:
                values[field.name] = sorted(str(o) for o in getattr(obj, field.name).all()) if obj.pk else []
            elif field.is_relation:  # a foreign key reads as the object's name, not its id
                related = getattr(obj, field.name, None)
                values[field.name] = None if related is None else _json_value(str(related))
            else:
                values[field.name] = _json_value(field.value_from_object(obj))
        return values

    def _secret_note(self, name: str) -> str:
        field = self.model._meta.get_field(name)
        return gettext("%(field)s changed") % {"field": field.verbose_name}

    def save_model(self, request, obj, form, change) -> None:
        if change and obj.pk:
            before = self.model._default_manager.filter(pk=obj.pk).first()
            obj._audit_before = self.audit_values(before) if before is not None else {}
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change) -> None:
        # After the many-to-many fields are saved: the entry sees the groups as they now are.
        super().save_related(request, form, formsets, change)
        obj = form.instance
        after = self.audit_values(obj)
        secret = set(self.audit_secret_fields)
        if not change:
            details = {"fields": {k: v for k, v in after.items() if k not in secret and v not in ("", None, [], {})}}
            audit.record(request.user, f"{self.get_audit_name()}.add", target=obj, details=details, request=request)
            return
        before = getattr(obj, "_audit_before", {})
        changed = {}
        for name, value in after.items():
            if name in before and before[name] == value:
                continue
            changed[name] = self._secret_note(name) if name in secret else {"from": before.get(name), "to": value}
        if changed:
            audit.record(request.user, f"{self.get_audit_name()}.change", target=obj, details={"changed": changed},
                         request=request)

    def delete_model(self, request, obj) -> None:
        gone = copy.copy(obj)  # deleting clears obj.pk; the entry needs it
        super().delete_model(request, obj)
        audit.record(request.user, f"{self.get_audit_name()}.delete", target=gone, request=request)

    def delete_queryset(self, request, queryset) -> None:
        gone = [copy.copy(obj) for obj in queryset]
        super().delete_queryset(request, queryset)
        for obj in gone:
            audit.record(request.user, f"{self.get_audit_name()}.delete", target=obj, request=request)


def _json_value(value):
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, dict)):
        text = json.dumps(value, default=str)
        return value if len(text) <= AUDIT_VALUE_LENGTH else text[:AUDIT_VALUE_LENGTH] + "…"
    text = str(value)
    return text if len(text) <= AUDIT_VALUE_LENGTH else text[:AUDIT_VALUE_LENGTH] + "…"


class LogAdmin(admin.ModelAdmin):
    """A log in the admin (audit entries, webhook deliveries): read-only for everyone, superusers
    included; `json_block` shows a JSON field readably."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @staticmethod
    def json_block(value) -> str:
        return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))
