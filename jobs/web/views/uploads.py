"""Files sent ahead of Start, over the tus protocol 1.0.0 (https://tus.io/protocols/resumable-upload),
core plus its creation, termination and expiration extensions; the New job page sends with
tus-js-client (static/vendor/tus-js-client).

    OPTIONS /uploads/          what the server supports
    POST    /uploads/          a new upload (Upload-Length, Upload-Metadata: filename, kind)
    GET     /uploads/?kind=    the user's unused uploads, JSON (the form offers to reuse them)
    HEAD    /uploads/<id>      how much has arrived (Upload-Offset): where a resumed upload goes on
    PATCH   /uploads/<id>      the next piece, at Upload-Offset
    DELETE  /uploads/<id>      remove it
    GET     /uploads/<id>      what the check found, JSON
    GET     /uploads/<id>/preview   the face found / the first frame / the photo, small

Every upload is looked up within the user's own: someone else's id answers 404. Pieces are limited
per request by portal/limits.py (REQUEST_MAX_BYTES); the client sends 8 MiB at a time.
"""
from __future__ import annotations

import base64
import binascii
from functools import wraps
from uuid import UUID

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.http import http_date
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt

from jobs.api.auth import api_view, token_from_header
from jobs.models import Upload, UploadKind, UploadStatus
from jobs.results.files import serve_file
from jobs.uploads import store as upload_store
from jobs.uploads.store import UploadRefused

TUS_VERSION = "1.0.0"
TUS_EXTENSIONS = "creation,termination,expiration"
#: uploads listed for the form, most recent first
LISTED = 2000


def _tus_headers(response: HttpResponse) -> HttpResponse:
    response["Tus-Resumable"] = TUS_VERSION
    response["Cache-Control"] = "no-store"
    return response


def _refusal(message: str, status: int) -> HttpResponse:
    # tus-js-client shows the body of a refusal as the error's text: plain words, no markup
    return _tus_headers(HttpResponse(message, status=status, content_type="text/plain; charset=utf-8"))


def tus_view(*methods: str):
    """The API's contract (jobs.api.auth.api_view: a token or the session, CSRF for the session, 405
    with Allow), so scripts send ahead with a token as the page does with its session; a page whose
    session ended reads what to do instead of a word about tokens."""

    def decorate(view):
        inner = api_view(*methods)(view)

        @csrf_exempt  # api_view checks the session's CSRF itself; a token needs none
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if token_from_header(request) is None and not request.user.is_authenticated:
                return _refusal(_("You are logged out. Log in again; what was already sent is kept."), 403)
            return _tus_headers(inner(request, *args, **kwargs))

        return wrapped

    return decorate


def _own_upload(request: HttpRequest, upload_id: UUID) -> Upload:
    return get_object_or_404(Upload.objects.of(request.user), pk=upload_id)


@tus_view("OPTIONS", "POST", "GET", "HEAD")
def uploads(request: HttpRequest) -> HttpResponse:
    if request.method == "OPTIONS":
        response = HttpResponse(status=204)
        response["Tus-Version"] = TUS_VERSION
        response["Tus-Extension"] = TUS_EXTENSIONS
        response["Tus-Max-Size"] = str(settings.UPLOAD_MAX_BYTES)
        return _tus_headers(response)
    if request.method in ("GET", "HEAD"):
        return _list(request)
    if request.headers.get("Tus-Resumable") != TUS_VERSION:
        return _refusal(_("This upload client speaks another version of the protocol; reload the page."), 412)
    try:
        size = int(request.headers.get("Upload-Length", ""))
    except ValueError:
        return _refusal(_("The file's size is missing."), 400)
    meta = parse_metadata(request.headers.get("Upload-Metadata", ""))
    try:
        upload = upload_store.create(request.user, meta.get("kind", ""), meta.get("filename", ""), size)
    except UploadRefused as exc:
        return _refusal(exc.message, exc.status)
    response = HttpResponse(status=201)
    response["Location"] = reverse("upload", args=[upload.id])
    response["Upload-Expires"] = http_date(upload.expires_at.timestamp())
    return _tus_headers(response)


@tus_view("HEAD", "PATCH", "DELETE", "GET")
def upload(request: HttpRequest, upload_id: UUID) -> HttpResponse:
    try:
        item = _own_upload(request, upload_id)
    except Http404:
        return _refusal(_("This upload is no longer kept; choose the file again."), 404)
    if request.method == "GET":
        return _tus_headers(JsonResponse(describe(item)))
    if request.method == "DELETE":
        upload_store.remove(item)
        return _tus_headers(HttpResponse(status=204))
    if request.method == "HEAD":
        response = HttpResponse(status=200)
        response["Upload-Offset"] = str(item.offset)
        response["Upload-Length"] = str(item.size)
        response["Upload-Expires"] = http_date(item.expires_at.timestamp())
        return _tus_headers(response)
    # PATCH: the next piece
    if request.content_type != "application/offset+octet-stream":
        return _refusal(_("The piece was not sent as the protocol asks; reload the page."), 415)
    try:
        offset = int(request.headers.get("Upload-Offset", ""))
        length = int(request.headers["Content-Length"]) if request.headers.get("Content-Length") else None
    except ValueError:
        return _refusal(_("The piece's position is missing."), 400)
    try:
        item = upload_store.append(item, offset, request, length)
    except UploadRefused as exc:
        response = _refusal(exc.message, exc.status)
        if exc.offset is not None:  # a 409: where the client resumes
            response["Upload-Offset"] = str(exc.offset)
        return response
    response = HttpResponse(status=204)
    response["Upload-Offset"] = str(item.offset)
    response["Upload-Expires"] = http_date(item.expires_at.timestamp())
    return _tus_headers(response)


@tus_view("GET", "HEAD")
def upload_preview(request: HttpRequest, upload_id: UUID) -> HttpResponse:
    item = _own_upload(request, upload_id)
    if item.status != UploadStatus.READY:
        raise Http404("No preview")
    return serve_file(item.preview_path, "preview.jpg")


def _list(request: HttpRequest) -> HttpResponse:
    qs = Upload.objects.of(request.user).order_by("-created_at")
    kind = request.GET.get("kind", "")
    if kind:
        if kind not in UploadKind.values:
            return JsonResponse({"error": _("Unknown kind of file.")}, status=400)
        qs = qs.filter(kind=kind)
    items = list(qs[:LISTED])
    upload_store.keep_alive(items)
    return _tus_headers(JsonResponse({"uploads": [describe(u) for u in items]}))


def describe(item: Upload) -> dict:
    """What the form shows of an upload (and what the estimate counts)."""
    return {
        "id": str(item.id), "url": reverse("upload", args=[item.id]), "name": item.name, "kind": item.kind,
        "size": item.size, "offset": item.offset, "status": item.status, "problem": item.problem, "info": item.info,
        "preview": reverse("upload-preview", args=[item.id]) if item.status == UploadStatus.READY and item.preview_path.exists() else None,
        "expires_at": item.expires_at.isoformat(),
        "sent_at": item.created_at.isoformat() if item.created_at else None,  # "sent ..." on the form
    }


def parse_metadata(header: str) -> dict[str, str]:
    """tus Upload-Metadata: `key base64value,key2 base64value2` (a value may be absent). Values that
    are not base64 of UTF-8 are dropped, never guessed."""
    out: dict[str, str] = {}
    for pair in header.split(","):
        key, _sep, value = pair.strip().partition(" ")
        if not key:
            continue
        try:
            out[key] = base64.b64decode(value.strip(), validate=True).decode("utf-8") if value.strip() else ""
        except (binascii.Error, UnicodeDecodeError):
            continue
    return out
