"""The New job form. It only collects the user's choices: every rule about them lives in
`jobs.job.start.start_job`, shared with the API, whose `StartError.field` names one of these fields."""
from __future__ import annotations

import uuid

from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from jobs import ratelimit
from jobs.models import Team, Template

#: which faces of the photos and videos are replaced, as the New job page asks (worker/choices.py:
#: FACE_SELECTORS; the admin's words for the same choice are in jobs.models.template)
FACE_CHOICES = [("many", _("Every face in every photo and video")),
                ("one", _("Only the largest face (the person nearest the camera)")),
                ("reference", _("Only one person: faces that look like a photo I add"))]

#: ids of files sent ahead taken from one form (more than a user may have waiting are ignored)
MAX_UPLOAD_IDS = 5000


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Zero or more files under one name (Django's documented recipe)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        kwargs.setdefault("required", False)
        # Empty files reach jobs.uploads.content.check_upload, whose message names the file
        # (Django's own "The submitted file is empty." does not say which one).
        kwargs.setdefault("allow_empty_file", True)
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        if isinstance(data, (list, tuple)):
            return [super(MultipleFileField, self).clean(d, initial) for d in data if d]
        return [super().clean(data, initial)] if data else []


class UploadIdsField(forms.Field):
    """Ids of files sent ahead of Start (jobs.models.Upload), one hidden input each, in order.
    Anything that is not an id is dropped: Start looks each one up among the user's own uploads."""

    widget = forms.MultipleHiddenInput

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("required", False)
        super().__init__(*args, **kwargs)

    def to_python(self, value):
        out = []
        for item in value or []:
            try:
                out.append(str(uuid.UUID(str(item))))
            except ValueError:
                continue
        return list(dict.fromkeys(out))[:MAX_UPLOAD_IDS]


class TemplateChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Template) -> str:
        return obj.shown_name  # read when the page renders: in the reader's language


class NewJobForm(forms.Form):
    # Not required here: an empty choice reaches start_job, which says what to do in plain words.
    template = TemplateChoiceField(queryset=Template.objects.none(), required=False, empty_label=None,
                                   widget=forms.RadioSelect, label=_("Template"))
    source = MultipleFileField(label=_("Face photo(s)"),
                               help_text=_("One or more photos of the person whose face goes in."),
                               widget=MultipleFileInput(attrs={"accept": "image/*"}))
    target_folder = forms.CharField(label=_("Target folder on the cluster"), required=False, max_length=1000,
                                    widget=forms.TextInput(attrs={"placeholder": _("Type a folder path or click Browse"),
                                                                  "autocomplete": "off", "spellcheck": "false"}))
    targets = MultipleFileField(label=_("…or upload target files"),
                                help_text=_("Images or videos whose faces are replaced."),
                                widget=MultipleFileInput(attrs={"accept": "image/*,video/*"}))
    face_selector = forms.ChoiceField(label=_("Which faces to replace"), choices=FACE_CHOICES, required=False,
                                      widget=forms.RadioSelect)
    reference = forms.FileField(label=_("A photo of the person whose face is replaced"), required=False,
                                widget=forms.ClearableFileInput(attrs={"accept": "image/*"}),
                                help_text=_("Only faces that look like this person are replaced; other people stay as they are."))
    reference_uploads = UploadIdsField()
    source_uploads = UploadIdsField()
    target_uploads = UploadIdsField()
    name = forms.CharField(label=_("Job name (optional)"), required=False, max_length=200)
    consent = forms.BooleanField(label=_("I have the right to process the faces in these photos"), required=False)
    # Checked by start_job (jobs.webhooks.guard), as for the API: the same words either way.
    callback_url = forms.CharField(label=_("Callback URL (for programs)"), required=False, max_length=2000,
                                   help_text=_("When the job ends, the portal calls this address with a signed "
                                               "message, so that a program of yours can pick up the results."),
                                   widget=forms.TextInput(attrs={"inputmode": "url", "autocomplete": "off",
                                                                 "spellcheck": "false",
                                                                 "placeholder": "https://"}))

    # Offered only to a member of several teams (jobs.models.team); start_job checks it again.
    team = forms.ModelChoiceField(label=_("For which team"), queryset=Team.objects.none(), required=False,
                                  empty_label=None,
                                  help_text=_("The team whose share of the cluster this job uses, and whose "
                                              "usage it counts in."))

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        teams = Team.objects.of(user)
        mine = list(teams)
        self.fields["template"].queryset = Template.objects.usable_by(user).used_by(mine).select_related("cluster")
        self.fields["team"].queryset = teams
        default = teams.default_for(user) if mine else None
        self.fields["team"].initial = default.pk if default else None
        self.several_teams = len(mine) > 1


class RateLimitedAuthenticationForm(AuthenticationForm):
    """Django's login form. django-axes, the first authentication backend, refuses every attempt
    (the right password too) of a (user name, address) pair with too many recent failures
    (jobs.ratelimit); the form then says so in plain words, not "didn't match", and `locked_out`
    tells the page. The response becomes the lockout page (jobs.ratelimit.lockout_response)."""

    locked_out = False

    def clean(self):
        try:
            return super().clean()
        except ValidationError:
            if getattr(self.request, "axes_locked_out", False):
                self.locked_out = True
                raise ValidationError(ratelimit.lockout_message(self.request), code="locked_out") from None
            raise
