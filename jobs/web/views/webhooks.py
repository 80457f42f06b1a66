"""The owner's webhooks: the deliveries page (/webhooks/, with "Send again") and the signing secret
on the Account page (create / rotate, shown once).

The secret is shown in the answer to the POST that made it, never again: the page is not cached
(no-store), not redirected to (a redirect would need it stored somewhere between two requests),
and the database keeps it encrypted (`jobs.secrets`).
"""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from jobs import audit
from jobs.models import WebhookDelivery, WebhookSecret
from jobs.web.views.account import account_page
from jobs.webhooks import deliver

DELIVERIES_PER_PAGE = 50


@login_required
@require_http_methods(["GET", "HEAD"])
def webhook_list(request: HttpRequest) -> HttpResponse:
    """The user's own deliveries, newest first (oversight of everyone's is the admin's, jobs.access)."""
    deliveries = WebhookDelivery.objects.visible_to(request.user).select_related("job", "booking")
    context = {
        "page": Paginator(deliveries, DELIVERIES_PER_PAGE).get_page(request.GET.get("page")),
        "has_secret": WebhookSecret.objects.filter(user=request.user).exists(),
    }
    return render(request, "jobs/webhooks.html", context)


@login_required
@require_POST
def webhook_send_again(request: HttpRequest, delivery_id) -> HttpResponse:
    delivery = WebhookDelivery.objects.visible_to(request.user).filter(pk=delivery_id).first()
    if delivery is None:
        raise Http404
    if deliver.send_again(delivery):
        audit.record(request.user, "webhook.send_again", target=delivery, request=request)
        messages.success(request, _("The call is being sent again; reload the page to see how it went."))
    else:
        messages.error(request, _("Only a failed call can be sent again."))
    return redirect(reverse("webhooks"))


@login_required
@require_POST
def webhook_secret(request: HttpRequest) -> HttpResponse:
    """Create the signing secret, or rotate it once the user confirmed (the old one stops working)."""
    had_one = WebhookSecret.objects.filter(user=request.user).exists()
    if had_one and request.POST.get("confirm") != "yes":
        return account_page(request, confirm_rotate=True)
    with transaction.atomic():
        secret = WebhookSecret.rotate(request.user)
        audit.record(request.user, "webhook_secret.rotate" if had_one else "webhook_secret.create",
                     target=request.user, request=request)
    response = account_page(request, new_secret=secret)
    add_never_cache_headers(response)  # no-store: the secret stays out of every cache
    return response
