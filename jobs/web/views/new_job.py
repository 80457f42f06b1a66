"""New job: the form, and Start.

Files are normally sent ahead, as soon as they are chosen (tus: jobs/web/views/uploads.py), and the
form carries only their ids; without JavaScript they come with the form. Either way a refused Start
loses nothing: the form comes back with every problem next to its field, and the good files sent
with it are kept as uploads, listed on the form, sent again by nobody. `?again=<job>` fills the form
from one of the user's jobs ("Run again"): its template, folder, name, and its files;
`?again=<job>&only=look` with only its results that need a look, and no face photo: the user adds
another (jobs.job.again; the form carries the job's id in `again_look`, and Start picks its files).
"""
from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from jobs import bookings
from jobs.bookings.use import job_outlasts_booking
from jobs.errors import StartError
from jobs.job import again
from jobs.job.preview import start_preview
from jobs.job.start import start_job
from jobs.models import Job, Upload, UploadKind
from jobs.models.job import PREVIEW_PHOTOS
from jobs.quotas import quota_status, targets_limits
from jobs.uploads import store as upload_store
from jobs.web.forms import NewJobForm
from jobs.web.views.uploads import describe
from worker.facecheck import SAME_PERSON_MAX_DISTANCE
from worker.manifest import IMAGE_EXTENSIONS, VIDEO_EXTENSIONS

#: files of a repeated job made ready again at most (a bigger set: pick its folder, or start it anew)
AGAIN_MAX_FILES = 1000


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def job_new(request: HttpRequest) -> HttpResponse:
    sent = {"source": [], "targets": [], "reference": []}
    look_again = None  # the job whose flagged results this one tries again (jobs.job.again)
    if request.method == "POST":
        form = NewJobForm(request.POST, request.FILES, user=request.user)
        preview = "preview" in request.POST  # "Try it on a few photos" (jobs.job.preview)
        look_again = _job_to_repeat(request, request.POST.get("again_look", ""))
        if form.is_valid():
            data = form.cleaned_data
            picked = again.picked_paths(look_again, data["target_folder"].strip())
            try:
                if preview:
                    sent = _kept(request, data)  # every file an upload now: the preview copies them
                    return _previewed(request, start_preview(
                        user=request.user, template=data["template"], sent=sent,
                        target_folder=data["target_folder"].strip(), name=data["name"],
                        face_selector=data["face_selector"] or None, consent=data["consent"],
                        booking=request.POST.get("booking", "").strip() or None,
                        mixed_faces_ok=bool(request.POST.get("mixed_faces_ok")), picked=picked,
                        team=data["team"], request=request))
                job = start_job(user=request.user, template=data["template"], sources=data["source"],
                                target_folder=data["target_folder"].strip(), target_files=data["targets"],
                                consent=data["consent"], name=data["name"], request=request,
                                source_uploads=data["source_uploads"], target_uploads=data["target_uploads"],
                                face_selector=data["face_selector"] or None, reference=data["reference"],
                                reference_uploads=data["reference_uploads"], callback_url=data["callback_url"],
                                booking=request.POST.get("booking", "").strip() or None,
                                mixed_faces_ok=bool(request.POST.get("mixed_faces_ok")), picked=picked,
                                team=data["team"])
            except StartError as exc:
                if not preview:
                    sent = _kept(request, data)  # before add_error, which takes fields out of cleaned_data
                for field, message in exc.problems:
                    form.add_error(field if field in form.fields else None, message)
            else:
                messages.success(request, _("Job started. This page follows its progress."), extra_tags="job-started")
                if warning := job_outlasts_booking(job):
                    messages.warning(request, warning)
                return redirect("job-detail", job_id=job.id)
        if preview and _wants_json(request):  # the page's script shows them by the Try button
            return JsonResponse({"errors": [str(m) for messages_ in form.errors.values() for m in messages_]},
                                status=400)
    else:
        form = NewJobForm(user=request.user, initial={"target_folder": request.GET.get("target_folder", "")})
        # The template of the user's last job, else the admin's first card (Template.objects.default_for).
        offered = form.fields["template"].queryset
        # "Start a job in this booking": a template on the booking's cluster, or the job could not use it
        booked = _booking_asked(request)
        first = (offered.filter(cluster_id=booked.cluster_id).default_for(request.user) if booked else None) \
            or offered.default_for(request.user)
        form.initial["template"] = first.pk if first else None
        form.initial["face_selector"] = first.face_selector if first else "many"
        repeated = _job_to_repeat(request, request.GET.get("again", ""))
        if repeated is not None and request.GET.get("only") == again.ONLY_LOOK:
            sent, look_again = _fill_for_another_face(form, repeated, request.user), repeated
        elif repeated is not None:
            sent = _fill_from(form, repeated, request.user)
    templates = form.fields["template"].queryset
    context = {
        "form": form, "quota": quota_status(request.user), "preview_photos": PREVIEW_PHOTOS,
        "look_again": look_again, "look_again_count": again.flagged(look_again).count() if look_again else 0,
        # what the page's script checks as files are chosen or a folder counted, before Start
        "targets_limits": targets_limits(request.user, {t.cluster for t in templates}),
        # the user's GPU bookings a job may run in ("Run inside my GPU booking"); Start checks the cluster
        "bookings": list(bookings.usable_bookings(request.user)),
        "booking_chosen": request.POST.get("booking", "") if request.method == "POST" else request.GET.get("booking", ""),
        # what the upload widget starts from: files already sent, with what their check found
        "sent": {key: [describe(u) for u in uploads] for key, uploads in sent.items()},
        "upload_limits": {"max_bytes": settings.UPLOAD_MAX_BYTES, "image_ext": " ".join(IMAGE_EXTENSIONS),
                          "video_ext": " ".join(VIDEO_EXTENSIONS),
                          "same_person_max": SAME_PERSON_MAX_DISTANCE},  # face photos of two people (jobs.uploads.identity)
    }
    # What the user has left, shown before Start (the Start itself checks again, under a lock).
    return render(request, "jobs/job_new.html", context)


def _kept(request: HttpRequest, data: dict) -> dict[str, list[Upload]]:
    """After a refusal: the uploads the form named (still there), then the good files sent with the
    form itself, kept as uploads so that nobody has to choose them again."""
    out = {}
    for field, ids_field, kind in (("source", "source_uploads", UploadKind.SOURCE), ("targets", "target_uploads", UploadKind.TARGET),
                                   ("reference", "reference_uploads", UploadKind.REFERENCE)):
        found = {str(u.id): u for u in Upload.objects.of(request.user).filter(kind=kind, pk__in=data[ids_field])}
        uploads = [found[i] for i in data[ids_field] if i in found]
        files = data[field] if isinstance(data[field], list) else [data[field]] if data[field] else []
        uploads += [u for u in (upload_store.keep(request.user, f, kind) for f in files) if u is not None]
        out[field] = uploads
    return out


def _booking_asked(request: HttpRequest):
    """The usable booking `?booking=` names (from its page's "Start a job in this booking"), or None."""
    booking_id = request.GET.get("booking", "")
    try:
        return bookings.usable_bookings(request.user).filter(pk=booking_id).first() if booking_id else None
    except ValidationError:  # not an id: no booking
        return None


def _job_to_repeat(request: HttpRequest, job_id: str) -> Job | None:
    """One of the user's jobs (visible to them), or None."""
    if not job_id:
        return None
    try:
        return Job.objects.visible_to(request.user).filter(pk=job_id).select_related("template").first()
    except Exception:  # noqa: BLE001 - not an id: nothing to repeat
        return None


def _fill_from(form: NewJobForm, job: Job, user, targets=None, with_sources: bool = True) -> dict[str, list[Upload]]:
    """Prefill the form from `job`: the same template (if still offered), team (if still theirs),
    folder and name; its face photos and uploaded files (`targets`, default: all) made ready to send
    again (linked, not copied). Consent is asked again."""
    if form.fields["template"].queryset.filter(pk=job.template_id).exists():
        form.initial["template"] = job.template_id
    form.initial["face_selector"] = job.snapshot.face_selector
    form.initial["target_folder"] = job.target_folder
    if job.team_id and form.fields["team"].queryset.filter(pk=job.team_id).exists():
        form.initial["team"] = job.team_id  # the same team: its folder may be the team's (jobs.clusters.team_roots)
    form.initial["name"] = job.name
    form.initial["callback_url"] = job.callback_url
    sources = [upload_store.keep(user, s.file.path, UploadKind.SOURCE, name=s.original_name)
               for s in (job.sources.all()[:AGAIN_MAX_FILES] if with_sources else []) if s.file]
    targets = [] if job.target_folder else [
        upload_store.keep(user, t.upload.path, UploadKind.TARGET, name=t.name)
        for t in (job.targets.order_by("index") if targets is None else targets).exclude(upload="")[:AGAIN_MAX_FILES]]
    reference = [upload_store.keep(user, job.reference_face.path, UploadKind.REFERENCE)] if job.reference_face else []
    return {"source": [u for u in sources if u], "targets": [u for u in targets if u], "reference": [u for u in reference if u]}


def _fill_for_another_face(form: NewJobForm, job: Job, user) -> dict[str, list[Upload]]:
    """Prefill the form to try `job`'s flagged results again (jobs.job.again): as Run again, but
    only those photos, and no face photo (another one is the point)."""
    sent = _fill_from(form, job, user, targets=again.flagged(job), with_sources=False)
    form.initial["name"] = _("%(name)s, another face") % {"name": job.name} if job.name else _("Another face")
    return sent


def _wants_json(request: HttpRequest) -> bool:
    return request.headers.get("Accept", "").startswith("application/json")


def _previewed(request: HttpRequest, job: Job) -> HttpResponse:
    """A preview started: the page's script follows it in place (the form keeps every choice, for
    the whole job's Start); without a script, its own page."""
    if _wants_json(request):
        return JsonResponse({"id": str(job.id), "name": job.name,
                             "url": reverse("job-detail", args=[job.id]),
                             "live": reverse("job-live", args=[job.id])}, status=201)
    messages.success(request, _("Preview started. Your files are still on the New job page for the whole job."))
    return redirect("job-detail", job_id=job.id)
