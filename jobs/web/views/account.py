"""The account page (/account): the user's email address (changed through a link sent to the new
one), the portal's language, which emails they get, and a link to change the password.

An email address changes only when its owner, logged in, confirms the link mailed to the NEW
address (`jobs.usage.notifications.email_change_token`): the link is signed, expires, names the
account and the address it replaces (so it works once), and its page asks for a click (a mail
scanner opening links changes nothing). The old address is then told.
"""
from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import PasswordChangeView
from django.contrib.messages.views import SuccessMessageMixin
from django.core import signing
from django.core.cache import cache
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils import translation
from django.utils.translation import get_language_info, gettext_lazy
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST
from django.views.i18n import set_language as django_set_language

from jobs import audit
from jobs.background import enqueue
from jobs.models import NotificationPreference, WebhookSecret
from jobs.models.preferences import LanguagePreference
from jobs.usage import notifications
from jobs.web import language as portal_language


class NotificationPreferenceForm(forms.ModelForm):
    class Meta:
        model = NotificationPreference
        fields = ["job_emails", "quota_emails", "booking_emails"]


class EmailChangeForm(forms.Form):
    email = forms.EmailField(label=gettext_lazy("New email address"), max_length=254)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_email(self) -> str:
        email = self.cleaned_data["email"].strip()
        if email.lower() == (self.user.email or "").lower():
            raise forms.ValidationError(_("That is already your email address."))
        if address_taken(email, self.user):
            raise forms.ValidationError(_("Another account uses that address. Ask your admin if it should be yours."))
        return email


def language_choices() -> list[tuple[str, str]]:
    """"Follow my browser", then each of the portal's languages in its own words (English, 简体中文)."""
    return [(LanguagePreference.FOLLOW_BROWSER, _("Follow my browser"))] + [
        (code, get_language_info(code)["name_local"]) for code, _name in settings.LANGUAGES]


class LanguageForm(forms.Form):
    language = forms.ChoiceField(label=gettext_lazy("Language"), widget=forms.RadioSelect, required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["language"].choices = language_choices()


def address_taken(email: str, user) -> bool:
    """Whether an account other than `user` has `email` (in any letter case)."""
    return get_user_model().objects.filter(email__iexact=email).exclude(pk=user.pk).exists()


def account_page(request: HttpRequest, status: int = 200, **forms_and_context) -> HttpResponse:
    """The account page with its forms (empty unless given: a refused form comes back with its
    errors) and `forms_and_context` on top; also the answer of the webhook secret's POST."""
    context = {
        "email_form": EmailChangeForm(user=request.user),
        "language_form": LanguageForm(initial={"language": LanguagePreference.language_of(request.user)}),
        "notification_form": NotificationPreferenceForm(instance=NotificationPreference.for_user(request.user)),
        "link_hours": notifications.EMAIL_CHANGE_MAX_AGE // 3600,
        # when the webhook signing secret was made or changed (never the secret itself: shown once)
        "webhook_secret": WebhookSecret.objects.filter(user=request.user).values("created_at", "rotated_at").first(),
        **forms_and_context,
    }
    return render(request, "jobs/account.html", context, status=status)


@login_required
@require_http_methods(["GET", "HEAD"])
def account(request: HttpRequest) -> HttpResponse:
    return account_page(request)


@login_required
@require_POST
def email_change(request: HttpRequest) -> HttpResponse:
    """Send the link that confirms a new address to that address; the account keeps its old one until then."""
    form = EmailChangeForm(request.POST, user=request.user)
    if not form.is_valid():
        return account_page(request, status=400, email_form=form)
    if not _may_send_link(request.user):
        form.add_error("email", _("Too many links were sent from your account in the last hour. Try again later."))
        return account_page(request, status=429, email_form=form)
    email = form.cleaned_data["email"]
    _enqueue_email("send_email_change_link", request.user.pk, email)
    audit.record(request.user, "account.email_change_asked", target=request.user, details={"new": email},
                 request=request)
    messages.success(request, _("We sent a link to %(email)s. Open it within %(hours)s hours, logged in as you are "
                                "now, to make it your address. Until then emails keep going to your current address.")
                     % {"email": email, "hours": notifications.EMAIL_CHANGE_MAX_AGE // 3600})
    return redirect(reverse("account") + "#email")


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def email_confirm(request: HttpRequest, token: str) -> HttpResponse:
    """GET: ask to confirm the new address of the link; POST: make it the account's address."""
    try:
        change = notifications.read_email_change_token(token)
    except signing.SignatureExpired:
        return _refused(request, _("This link has expired. Ask for a new one below."))
    except signing.BadSignature:
        return _refused(request, _("This link is not valid. Copy the whole link from the email, or ask for a new one below."))
    user = request.user
    if change.get("user") != user.pk:
        return _refused(request, _("This link was sent for another account. Log out and log in as that account to use it."))
    if (user.email or "") != change.get("old", ""):
        return _refused(request, _("This link was already used, or your address changed since it was sent."))
    new = change.get("new", "")
    if address_taken(new, user):
        return _refused(request, _("Another account uses that address now. Ask your admin."))
    if request.method != "POST":
        return account_page(request, confirm_email=new)
    old = user.email
    # Conditional: of two clicks at once, one changes the address and tells the old one.
    if get_user_model().objects.filter(pk=user.pk, email=old).update(email=new) != 1:
        return _refused(request, _("This link was already used, or your address changed since it was sent."))
    user.email = new
    audit.record(user, "account.email_change", target=user, details={"old": old, "new": new}, request=request)
    _enqueue_email("send_email_changed_notice", user.pk, old)
    messages.success(request, _("Your email address is now %(email)s.") % {"email": new})
    return redirect(reverse("account") + "#email")


def _enqueue_email(task: str, user_id: int, address: str) -> None:
    """Queue `jobs.usage.notifications.<task>(user_id, address, language)` once the request commits:
    email goes out from the RQ worker, never from a request, in the language of this page."""
    language = translation.get_language()
    transaction.on_commit(lambda: enqueue.enqueue_account_email(task, user_id, address, language))


#: links to a new address one account may have sent per hour (the portal must not be a way to flood an inbox)
LINKS_PER_HOUR = 5


def _may_send_link(user) -> bool:
    """Count one more link for `user` this hour; False once LINKS_PER_HOUR were sent."""
    key = f"account:email-links:{user.pk}"
    cache.add(key, 0, timeout=3600)
    try:
        return cache.incr(key) <= LINKS_PER_HOUR
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=3600)
        return True


def _refused(request: HttpRequest, why: str) -> HttpResponse:
    messages.error(request, why)
    return redirect(reverse("account") + "#email")


@login_required
@require_POST
def language_settings(request: HttpRequest) -> HttpResponse:
    form = LanguageForm(request.POST)
    if not form.is_valid():
        return account_page(request, status=400, language_form=form)
    chosen = form.cleaned_data["language"]
    portal_language.remember(request, chosen)
    if not chosen:
        # Following the browser again: its Accept-Language speaks this answer's message too.
        translation.activate(_browser_language(request))
    messages.success(request, _("Your language is saved."))
    return portal_language.apply_cookie(redirect(reverse("account") + "#language"), chosen)


def _browser_language(request: HttpRequest) -> str:
    """The language the browser's Accept-Language picks among the portal's (the cookie ignored)."""
    cookie = request.COOKIES.pop(settings.LANGUAGE_COOKIE_NAME, None)
    try:
        return translation.get_language_from_request(request)
    finally:
        if cookie is not None:
            request.COOKIES[settings.LANGUAGE_COOKIE_NAME] = cookie


@login_required
@require_POST
def notification_settings(request: HttpRequest) -> HttpResponse:
    form = NotificationPreferenceForm(request.POST, instance=NotificationPreference.for_user(request.user))
    if form.is_valid():
        form.save()
        messages.success(request, _("Your email settings are saved."))
    return redirect(reverse("account") + "#notifications")


def set_language(request: HttpRequest) -> HttpResponse:
    """The language switch of the top bar (Django's set_language), remembered for a logged-in user."""
    response = django_set_language(request)
    chosen = request.POST.get("language", "") if request.method == "POST" else ""
    if request.user.is_authenticated and portal_language.is_supported(chosen):
        portal_language.remember(request, chosen)
    return response


class PasswordChange(SuccessMessageMixin, PasswordChangeView):
    """Django's own password change, back to the account page when done."""

    template_name = "registration/password_change_form.html"
    success_url = reverse_lazy("account")
    success_message = gettext_lazy("Your password is changed.")
