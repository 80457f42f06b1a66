"""Content check settings in the Django admin: one row, audited, like the retention settings.

What to refuse is ticked from the labels the built-in model knows (worker.content_safety's
NUDENET_LABELS), in plain words; it is stored as before, the labels separated by commas. The
plug-in path, and labels only another model knows, are for site engineers, in a folded section.
"""
from __future__ import annotations

from django import forms
from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from jobs.admin.base import AuditedAdmin
from jobs.models import SafetyPolicy
from worker.content_safety import NUDENET_LABELS

#: each label of the built-in model in plain words (the order of NUDENET_LABELS is the model's own)
LABEL_WORDS = {
    "FEMALE_BREAST_EXPOSED": _("A woman's bare breast"),
    "FEMALE_GENITALIA_EXPOSED": _("A woman's bare genitals"),
    "MALE_GENITALIA_EXPOSED": _("A man's bare genitals"),
    "BUTTOCKS_EXPOSED": _("Bare buttocks"),
    "ANUS_EXPOSED": _("A bare anus"),
    "MALE_BREAST_EXPOSED": _("A man's bare chest"),
    "BELLY_EXPOSED": _("A bare belly"),
    "ARMPITS_EXPOSED": _("Bare armpits"),
    "FEET_EXPOSED": _("Bare feet"),
    "FEMALE_BREAST_COVERED": _("A woman's covered breast"),
    "FEMALE_GENITALIA_COVERED": _("A woman's covered genitals"),
    "BUTTOCKS_COVERED": _("Covered buttocks"),
    "ANUS_COVERED": _("A covered anus"),
    "BELLY_COVERED": _("A covered belly"),
    "ARMPITS_COVERED": _("Covered armpits"),
    "FEET_COVERED": _("Covered feet"),
    "FACE_FEMALE": _("A woman's face"),
    "FACE_MALE": _("A man's face"),
}
#: the checkboxes: bare skin first (what a site usually refuses), then covered, then faces
LABEL_CHOICES = [(label, LABEL_WORDS.get(label, label)) for label in LABEL_WORDS if label in NUDENET_LABELS] + [
    (label, label) for label in NUDENET_LABELS if label not in LABEL_WORDS]


def split_labels(text: str) -> list[str]:
    """Labels written separated by commas (or lines), as the model's field stores them."""
    return [x.strip() for x in str(text or "").replace("\n", ",").split(",") if x.strip()]


class SafetyPolicyForm(forms.ModelForm):
    """`refuse` as checkboxes of the built-in model's labels, plus `other_labels` typed for another
    model; both are joined back into the one stored field, so the checks read it as before."""

    refuse = forms.MultipleChoiceField(
        label=_("Refuse images that show"), choices=LABEL_CHOICES, required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Tick what must not get through. A face photo that shows any of these cannot be used; a "
                    "result that shows any of these is deleted and never delivered."))
    other_labels = forms.CharField(
        label=_("Labels of another model"), required=False,
        help_text=_("Only with a model plug-in other than “nudenet”: the labels it reports that refuse an "
                    "image, separated by commas."))

    class Meta:
        model = SafetyPolicy
        fields = ("enabled", "check_sources", "check_outputs", "refuse", "min_score", "plugin")
        labels = {"plugin": _("Model plug-in")}
        help_texts = {
            "plugin": _("Which model looks at the images. Leave “nudenet”, the built-in model, unless a site "
                        "engineer has installed another one: they write it here as “package.module:callable” "
                        "(see docs/content-safety.md)."),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            stored = split_labels(self.instance.refuse)
            self.initial["refuse"] = [x for x in stored if x in NUDENET_LABELS]
            self.initial["other_labels"] = ", ".join(x for x in stored if x not in NUDENET_LABELS)

    def clean_refuse(self) -> str:
        ticked = set(self.cleaned_data.get("refuse") or ())
        others = [x for x in split_labels(self.data.get(self.add_prefix("other_labels"))) if x not in ticked]
        # The stored text, in the model's label order: "A, B" as it always was.
        return ", ".join([x for x in NUDENET_LABELS if x in ticked] + others)


@admin.register(SafetyPolicy)
class SafetyPolicyAdmin(AuditedAdmin):
    audit_name = "safety_policy"
    form = SafetyPolicyForm
    list_display = ("__str__", "enabled", "check_sources", "check_outputs", "min_score", "plugin")
    fieldsets = (
        (None, {"fields": ("enabled", "check_sources", "check_outputs", "refuse", "min_score")}),
        (_("For site engineers"), {
            "classes": ("collapse",),
            "description": _("Only needed when the site uses a content-check model other than the built-in one."),
            "fields": ("plugin", "other_labels"),
        }),
    )

    def has_add_permission(self, request):
        return super().has_add_permission(request) and not SafetyPolicy.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False  # without the row the defaults apply: the check is off
