"""`/api/v1/bookings`: book GPU time, list, read and cancel bookings (docs/api.md, "Bookings").

Thin views over jobs.bookings; the same auth, CSRF and error shape as the jobs API (api_view,
error). Every booking is looked up through `Booking.objects.visible_to(user)`, the caller's own
(jobs.access): another user's id answers 404, exactly like one that does not exist.
"""
from __future__ import annotations

import json
from datetime import timezone as dt_timezone

from django.http import JsonResponse
from django.urls import reverse
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from jobs import bookings
from jobs.api.auth import api_view, error
from jobs.api.paging import paged
from jobs.models import Booking, BookingState


def _iso(moment) -> str | None:
    return moment.astimezone(dt_timezone.utc).isoformat() if moment else None


def booking_shape(booking: Booking, request=None) -> dict:
    """The API's one shape of a booking (times in UTC, ISO 8601)."""
    reason = booking.reason
    if not reason and booking.state in (BookingState.CONFIRMED, BookingState.ACTIVE) and not booking.reservation_made:
        reason = _("Confirmed; the reservation is being made on the cluster.")
    if booking.is_cancelling:
        reason = _("Cancelling: the cluster has not released the GPUs yet (jobs still run inside the booking, or "
                   "the release is under way). The portal asks again every 2 minutes.")
    path = reverse("api-booking", args=[booking.pk])
    return {
        "id": str(booking.pk),
        "state": booking.state,
        "task_name": booking.task_name,
        "image_resolution": booking.image_resolution,
        "gpu_requirement": {"min_memory_gb": booking.min_memory_gb,
                            "compute_capability": booking.compute_capability or None,
                            "count": booking.gpu_count},
        "gpu_type": ({"slurm": booking.gpu_type.gres_type, "label": booking.gpu_type.display_name}
                     if booking.gpu_type_id else None),
        "cluster": booking.cluster.slug if booking.cluster_id else None,
        "start": _iso(booking.starts_at),
        "end": _iso(booking.ends_at),
        "duration_hours": booking.duration_minutes / 60,
        "priority": booking.priority,
        "reservation": booking.reservation_name or None,
        "reservation_ready": booking.reservation_made,
        "reason": reason,
        "callback_url": booking.callback_url,
        "url": request.build_absolute_uri(path) if request is not None else path,
    }


def _visible(request):
    return Booking.objects.visible_to(request.user).select_related("gpu_type", "cluster")


def _no_booking() -> JsonResponse:
    return error(_("No such booking."), 404)


@api_view("GET", "POST")
def bookings_view(request):
    """GET: the caller's bookings, newest first. POST: book GPU time."""
    if request.method == "POST":
        return _create(request)
    return _list(request)


def _create(request) -> JsonResponse:
    try:
        data = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return error(_("Send the booking as JSON (Content-Type: application/json)."), 400)
    try:
        booking = bookings.book(request.user, bookings.parse_request(data), request=request,
                                language=get_language() or "")
    except bookings.BookingError as exc:
        problems = [(None if f == "__all__" else f, m) for f, m in exc.problems.items()]
        field, message = problems[0]
        response = error(message, 400, field)
        if len(problems) > 1:  # every problem at once
            body = json.loads(response.content)
            body["errors"] = [{"field": f, "error": m} for f, m in problems]
            response = JsonResponse(body, status=400)
        return response
    body = booking_shape(booking, request)
    response = JsonResponse(body, status=201)
    response["Location"] = body["url"]
    return response


def _list(request) -> JsonResponse:
    """`{"count", "next", "previous", "results"}`; `?state=a,b`, `?limit=`, `?after=`/`?before=`/`?offset=` as for jobs."""
    qs = _visible(request).order_by("-created_at", "-pk")
    state = request.GET.get("state", "").strip()
    if state:
        wanted = [s.strip() for s in state.split(",") if s.strip()]
        unknown = [s for s in wanted if s not in BookingState.values]
        if unknown:
            return error(_("Unknown state %(state)s; use one of: %(known)s.")
                         % {"state": ", ".join(unknown), "known": ", ".join(BookingState.values)}, 400, "state")
        qs = qs.filter(state__in=wanted)
    return paged(request, qs, lambda booking: booking_shape(booking, request))


@api_view("GET", "DELETE")
def booking_view(request, booking_id):
    """GET: one booking. DELETE: cancel it (200 with the booking; 409 when it is already final)."""
    found = _visible(request).filter(pk=booking_id).first()
    if found is None:
        return _no_booking()
    if request.method == "DELETE":
        if not bookings.cancel(found, by_user=request.user, request=request):
            return error(_("This booking is already %(state)s; there is nothing to cancel.")
                         % {"state": found.get_state_display()}, 409)
        found = _visible(request).get(pk=booking_id)
    return JsonResponse(booking_shape(found, request))

