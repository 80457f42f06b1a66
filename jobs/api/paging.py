"""Pages of the API's newest-first lists (jobs, bookings): keyset, so a far page costs what the first does.

`next` and `previous` carry a cursor, `?after=` or `?before=` the last or first row seen (its
`created_at` in microseconds and its id), and the page is the rows just past it on the list's index
(owner or user, newest first): the rows before it are never read, and a row added meanwhile neither
shifts nor repeats a page. `?offset=` still works for clients written before the cursors (the API
only adds), at the old cost: the database walks every row before the offset.
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.core.exceptions import ValidationError
from django.http import JsonResponse
from django.utils.translation import gettext as _

from jobs.api.auth import error

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
#: beyond any real list, and small enough for every database's integers (a huge one was a 500)
MAX_OFFSET = 10**9
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class BadParameter(Exception):
    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.message, self.field = message, field


def whole_number(request, name: str, default: int, low: int, high: int | None = None) -> int:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high):
        bounds = f"{low}..{high}" if high is not None else f">= {low}"
        raise BadParameter(_("%(name)s must be a whole number, %(bounds)s.") % {"name": name, "bounds": bounds}, name)
    return value


def cursor_of(row) -> str:
    """The row's place in a newest-first list: microseconds since 1970 (exact: no float) and its id."""
    return f"{(row.created_at - _EPOCH) // _MICROSECOND}.{row.pk}"


def _place(qs, name: str, text: str) -> tuple[datetime, object]:
    """A cursor read back: (created_at, pk); a cursor not made by `cursor_of` is a clear 400."""
    micros, _dot, pk = text.partition(".")
    try:
        return _EPOCH + int(micros) * _MICROSECOND, qs.model._meta.pk.to_python(pk)
    except (ValueError, OverflowError, ValidationError):
        raise BadParameter(_("%(name)s must be a link's cursor as the API gave it; start again from the "
                             "first page.") % {"name": name}, name) from None


def paged(request, qs, shape) -> JsonResponse:
    """`{"count", "next", "previous", "results": [shape(row) ...]}` of `qs`, ordered newest first
    (`-created_at`, `-pk`): `?limit=`, then `?after=` or `?before=` (keyset) or `?offset=`."""
    after, before = request.GET.get("after", "").strip(), request.GET.get("before", "").strip()
    try:
        limit = whole_number(request, "limit", DEFAULT_LIMIT, low=1, high=MAX_LIMIT)
        offset = whole_number(request, "offset", 0, low=0, high=MAX_OFFSET)
        if sum(map(bool, (after, before, offset))) > 1:
            raise BadParameter(_("Use one of after, before and offset, not several."), "after" if after else "before")
        place = _place(qs, "after" if after else "before", after or before) if after or before else None
    except BadParameter as exc:
        return error(exc.message, 400, exc.field)
    count = qs.count()
    if offset:
        return _offset_page(request, qs, shape, count, offset, limit)
    if before:
        at, pk = place
        rows = list(qs.filter(created_at__gte=at).exclude(created_at=at, pk__lte=pk)
                    .order_by("created_at", "pk")[:limit + 1])
        more_before, rows = len(rows) > limit, rows[:limit][::-1]
        more_after = bool(rows)  # the row of the cursor, or those after it
    else:
        if after:
            at, pk = place
            # A range on created_at the index can seek to (an OR of the two cases made SQLite walk the
            # owner's rows from the newest: a far page cost what an offset did), less the cursor's own
            # microsecond at and after its id.
            qs = qs.filter(created_at__lte=at).exclude(created_at=at, pk__gte=pk)
        rows = list(qs[:limit + 1])
        more_after, rows = len(rows) > limit, rows[:limit]
        more_before = bool(after) and bool(rows)
    return JsonResponse({
        "count": count,
        "next": _page_url(request, limit, after=cursor_of(rows[-1])) if more_after else None,
        "previous": _page_url(request, limit, before=cursor_of(rows[0])) if more_before else None,
        "results": [shape(row) for row in rows],
    })


def _offset_page(request, qs, shape, count: int, offset: int, limit: int) -> JsonResponse:
    page = list(qs[offset:offset + limit])
    return JsonResponse({
        "count": count,
        "next": _page_url(request, limit, offset=offset + limit) if offset + limit < count else None,
        "previous": _page_url(request, limit, offset=max(offset - limit, 0)) if offset > 0 else None,
        "results": [shape(row) for row in page],
    })


def _page_url(request, limit: int, **place) -> str:
    """This list's URL with its filters, the limit and one place (after, before or offset)."""
    query = request.GET.copy()
    for name in ("after", "before", "offset"):
        query.pop(name, None)
    for name, value in place.items():
        query[name] = str(value)
    query["limit"] = str(limit)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
