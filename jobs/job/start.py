"""Start: turn a user's choices into a queued job, in one transaction, and enqueue its submission.

Called by the "New job" page and by `POST /api/v1/jobs` alike. Nothing here talks to the cluster:
an SSH outage during Start must never lose the job, so staging, folder listing and sbatch all
happen in the RQ task (`jobs.job.submit.submit_job`), which is retried.

The quota is checked in the same transaction that creates the job, before its row exists, after
locking what the quota counts (`jobs.quotas.check_quota`): two simultaneous Starts can never both
slip under a limit.
"""
from __future__ import annotations

import dataclasses
import logging
import shutil

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

import cluster
from cluster import PathNotAllowed, check_in_roots
from jobs import audit, content_safety, webhooks
from jobs.background import enqueue
from jobs.bookings.use import usable_booking
from jobs.clusters import team_roots
from jobs.clusters.folder_check import count_folder, outside_words
from jobs.errors import QuotaExceeded, StartError, UploadRejected
from jobs.job.priority import qos_for
from jobs.models import Job, Source, Target, Team, Template, Upload, UploadKind, UploadStatus
from jobs.models.job import PREVIEW_PHOTOS
from jobs.quotas import check_folder_targets, check_job_size, check_quota, check_targets_per_job, effective_limits
from jobs.uploads import identity
from jobs.uploads import store as upload_store
from jobs.uploads.content import check_upload, safe_name, unique_name, without_hidden_characters
from jobs.uploads.on_complete import check_face
from worker.choices import FACE_SELECTORS
from worker.manifest import IMAGE_EXTENSIONS, VIDEO_EXTENSIONS, default_output_name, is_video_name

log = logging.getLogger(__name__)

MEDIA_EXTENSIONS = IMAGE_EXTENSIONS + VIDEO_EXTENSIONS


@dataclasses.dataclass
class _StartFiles:
    """A Start's files: sent with the request (`sources`, `target_files`, `reference`), or sent ahead
    and found ready (`sent_*`: the user's jobs.models.Upload rows, claimed by the job)."""

    sources: list[UploadedFile]
    target_files: list[UploadedFile]
    reference: UploadedFile | None
    sent_sources: list[Upload]
    sent_targets: list[Upload]
    sent_reference: list[Upload]

    @property
    def sent(self) -> list[Upload]:
        return self.sent_sources + self.sent_targets + self.sent_reference

    @property
    def n_targets(self) -> int:
        return len(self.target_files) + len(self.sent_targets)

    def sizes(self) -> list[tuple[str, int, str]]:
        """(name, bytes, form field) of every uploaded source and target: what the quota weighs."""
        return ([(f.name, f.size, "source") for f in self.sources] + [(u.name, u.size, "source") for u in self.sent_sources]
                + [(f.name, f.size, "targets") for f in self.target_files]
                + [(u.name, u.size, "targets") for u in self.sent_targets])

    def video_frames(self) -> int:
        """The frames of the videos sent ahead (measured when they arrived): what the estimate counts."""
        return sum(u.info.get("frames") or 0 for u in self.sent_targets if u.is_video)


def start_job(*, user, template: Template | None, sources: list[UploadedFile] | None = None, target_folder: str = "",
              target_files: list[UploadedFile] | None = None, consent: bool = False, name: str = "",
              callback_url: str = "", request=None, source_uploads=(), target_uploads=(),
              face_selector: str | None = None, reference: UploadedFile | None = None, reference_uploads=(),
              booking=None, mixed_faces_ok: bool = False, is_preview: bool = False, picked=(), team=None) -> Job:
    """Create a queued job (and enqueue its submission on commit), or raise StartError listing every
    problem found (a QuotaExceeded when only a quota refuses it). Files come sent with the request
    (`sources`, `target_files`) or sent ahead (`source_uploads`, `target_uploads`: ids of the user's
    jobs.models.Upload). Which faces are replaced: `face_selector` (None: the template's), and for
    "reference" a photo of the person (`reference`, or one of `reference_uploads`).
    `booking`: the id of one of the user's usable GPU bookings on the template's cluster, whose Slurm
    reservation the job is submitted into (None or "": the open queue).
    `is_preview`: a preview of a job-to-be (jobs.job.preview): a folder counts as its first
    PREVIEW_PHOTOS photos, and no program is called back when it ends.
    `picked`: of the folder, only the files at these cluster paths (jobs.job.again).
    `team`: which of the user's teams it runs for (a Team, its id, or its Slurm account; None: the
    default, jobs.models.team); its Slurm account is frozen on the job.
    `request`, when given, only feeds the audit log."""
    sources, target_files = sources or [], target_files or []
    problems: list[tuple[str | None, str]] = []
    if template is None or not Template.objects.usable_by(user).filter(pk=template.pk).exists():
        problems.append(("template", _("Choose one of the templates offered to you.")))
        template = None
    if not consent:
        problems.append(("consent", _("Confirm that you have the right to process the faces in these photos.")))
    has_files = bool(target_files or target_uploads)
    sent_sources, sent_targets = _checked_uploads(user, sources, target_files, source_uploads, target_uploads,
                                                  target_folder, has_files, problems, request)
    problems += identity.mixed_faces_problems(sources, sent_sources, mixed_faces_ok)  # one person's faces only
    selector, sent_reference = _which_faces(user, template, face_selector, reference, reference_uploads, problems)
    files = _StartFiles(sources, target_files, reference, sent_sources, sent_targets, sent_reference)
    profile = template.cluster if template else None
    team_problems: list[tuple[str | None, str]] = []  # said after the folder's, in the form's order
    chosen_team = _which_team(user, team, team_problems)  # its folders are the job's (jobs.clusters.team_roots)
    by_quota = False  # only a quota refuses: QuotaExceeded, as check_quota would say
    if profile is not None:
        counted = None  # a folder's photos and videos, as its cluster counted them (None: not known yet)
        if target_folder and not has_files:
            target_folder, counted = _checked_folder(user, profile, chosen_team, target_folder, problems)
            if picked and counted is not None:
                counted = min(counted, len(picked))  # jobs.job.submit takes only those
            if is_preview and counted is not None:
                counted = min(counted, PREVIEW_PHOTOS)
        try:  # the limits of one job, before there is one (check_quota asks again, under its lock)
            if counted is None:
                check_job_size(profile, files.n_targets)
                check_targets_per_job(effective_limits(user), files.n_targets)
            else:
                check_folder_targets(user, counted, profile)
        except StartError as exc:
            problems.append((exc.field, exc.message))
            by_quota = isinstance(exc, QuotaExceeded)
    chosen_booking = usable_booking(user, booking, profile, problems) if booking else None
    problems += team_problems
    if chosen_team is not None and template is not None and not chosen_team.offers(template):
        problems.append(("template", _("Team %(team)s does not use this template: choose one of its templates, "
                                       "or another team.") % {"team": chosen_team.name}))
    callback_url = "" if is_preview else _checked_callback(callback_url, problems)
    if problems:
        raise (QuotaExceeded if by_quota and len(problems) == 1 else StartError).of(problems)

    # The QOS is decided now and frozen with the template (jobs.job.priority).
    snapshot = dataclasses.replace(template.snapshot(), face_selector=selector, qos=qos_for(user, template))
    job = Job(owner=user, name=without_hidden_characters(name).strip()[:200], template=template,
              template_snapshot=snapshot.to_json(),
              cluster=profile, target_folder=target_folder, consent_at=timezone.now(), callback_url=callback_url,
              booking=chosen_booking, is_preview=is_preview, picked=list(picked) if target_folder else [],
              team=chosen_team, slurm_account=chosen_team.slurm_account if chosen_team else "",
              language=translation.get_language() or "")  # what is written about it later is in it
    # Folder targets are counted on the cluster after Start (jobs.job.submit re-checks the count).
    _save(user, job, files, n_targets=files.n_targets if has_files else None, request=request)
    for upload in files.sent:
        upload.preview_path.unlink(missing_ok=True)
    log.info("job %s started by %s: template %s, %s", job.id, user, template.slug,
             f"folder {target_folder}" if target_folder else f"{job.total} uploaded target(s)")
    return job


def _checked_uploads(user, sources: list[UploadedFile], target_files: list[UploadedFile], source_uploads,
                     target_uploads, target_folder: str, has_files: bool, problems: list,
                     request) -> tuple[list[Upload], list[Upload]]:
    """The source and target uploads sent ahead, found ready (jobs.models.Upload); every file sent
    with the request checked (a face in each source photo, the content check when it is on), and
    exactly one of a target folder and target files (`has_files`) given; what is wrong is added to
    `problems`, in the order the form shows its fields."""
    sent_sources = _sent(user, source_uploads, UploadKind.SOURCE, "source", problems)
    sent_targets = _sent(user, target_uploads, UploadKind.TARGET, "targets", problems)
    if not sources and not source_uploads:
        problems.append(("source", _("Upload at least one photo of the face to put in.")))
    if bool(target_folder) == has_files:
        problems.append(("target_folder", _("Pick a target folder on the cluster or upload target files (one of the two).")))
    for f in sources:
        try:
            check_upload(f, kind="image")
            check_face(f)
        except UploadRejected as exc:
            problems.append(("source", _("Source %(name)s: %(reason)s") % {"name": f.name, "reason": exc}))
    content_safety.screen_start_sources(user, sources, sent_sources, problems, request)  # when the content check is on
    for f in target_files:
        try:
            check_upload(f, kind="media")
        except UploadRejected as exc:
            problems.append(("targets", _("Target %(name)s: %(reason)s") % {"name": f.name, "reason": exc}))
    return sent_sources, sent_targets


def _save(user, job: Job, files: _StartFiles, n_targets: int | None, request) -> None:
    """In one transaction: check the quota (locking what it counts first: a second Start waits
    here), save the job, its sources and targets, use up the files sent ahead, and enqueue the
    submission on commit. On any error nothing is left behind and the error is raised: files sent
    ahead go back where they were (the user still has them on the form), files written are removed."""
    claimed: list[upload_store.Claimed] = []
    try:
        with transaction.atomic():
            check_quota(user, job.template, n_targets, files.sizes(), frames=files.video_frames())
            job.save()
            audit.record(user, "job.start", target=job, request=request, details={
                "template": job.template.slug, "target_folder": job.target_folder,
                "uploaded_targets": files.n_targets,
                "sources": len(files.sources) + len(files.sent_sources), "consent_at": job.consent_at.isoformat(),
                "qos": job.snapshot.qos, "booking": str(job.booking.pk) if job.booking else "",
                "team": job.slurm_account})
            _use_up(user, files.sent)
            _attach_reference(job, files, claimed)
            _attach_sources(job, files, claimed)
            _attach_targets(job, files, claimed)
            if settings.SUBMIT_ON_START:
                transaction.on_commit(lambda: enqueue.enqueue_submission(job))
    except Exception:
        upload_store.unclaim(claimed)
        shutil.rmtree(job.media_dir, ignore_errors=True)
        raise


def _attach_reference(job: Job, files: _StartFiles, claimed: list[upload_store.Claimed]) -> None:
    """The photo of the person whose face is replaced, when there is one: sent with the form, or
    sent ahead (moved into the job's folder; added to `claimed`)."""
    if files.reference is not None:
        job.reference_face = _named(files.reference)
        job.save(update_fields=["reference_face"])
    elif files.sent_reference:
        claimed.extend(upload_store.claim(files.sent_reference, job.media_dir / "reference"))
        job.reference_face = str(claimed[-1].path)
        job.save(update_fields=["reference_face"])


def _attach_sources(job: Job, files: _StartFiles, claimed: list[upload_store.Claimed]) -> None:
    """A Source row for every source photo: those sent with the form, then those sent ahead."""
    for f in files.sources:
        Source.objects.create(job=job, file=_named(f), original_name=f.name[:255])
    sent = upload_store.claim(files.sent_sources, job.media_dir / "sources")
    claimed.extend(sent)
    for c in sent:
        Source.objects.create(job=job, file=str(c.path), original_name=c.upload.name[:255])


def _attach_targets(job: Job, files: _StartFiles, claimed: list[upload_store.Claimed]) -> None:
    """A Target row for every uploaded target, in order (those sent with the form first), each with
    its unique output name, its array task (chunk_size targets per task) and its path on the
    cluster; sets job.total. A folder job has none yet (jobs.job.submit lists the folder)."""
    used: set[str] = set()
    outs = [unique_name(default_output_name(safe_name(n)), used)
            for n in [f.name for f in files.target_files] + [u.name for u in files.sent_targets]]
    moved = upload_store.claim(files.sent_targets, job.media_dir / "targets", names=outs[len(files.target_files):])
    claimed.extend(moved)
    chunk_size = max(1, job.template.chunk_size)
    folder = job.folder
    rows = [dict(name=f.name[:500], upload=_named(f, out)) for f, out in zip(files.target_files, outs)]
    rows += [dict(name=c.upload.name[:500], upload=str(c.path)) for c in moved]
    for i, (row, out) in enumerate(zip(rows, outs)):
        Target.objects.create(job=job, index=i, output_name=out, task_index=i // chunk_size,
                              cluster_path=folder.target(out), **row)
    job.total = len(rows)
    job.videos = sum(1 for row in rows if is_video_name(row["name"]))
    job.save(update_fields=["total", "videos"])


def _sent(user, ids, kind: str, field: str, problems: list) -> list[Upload]:
    """The user's uploads `ids` of `kind`, in the order given; what is missing, refused or still
    arriving becomes a problem (one per file, with its name and what to do)."""
    ids = [str(i) for i in ids]
    found = {str(u.id): u for u in Upload.objects.of(user).filter(kind=kind, pk__in=ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        problems.append((field, ngettext(
            "%(n)s file sent earlier is no longer kept (it expired or was removed); choose it again.",
            "%(n)s files sent earlier are no longer kept (they expired or were removed); choose them again.",
            len(missing)) % {"n": len(missing)}))
    out = []
    for i in ids:
        upload = found.get(i)
        if upload is None:
            continue
        if upload.status == UploadStatus.REFUSED:
            problems.append((field, _("%(name)s: %(reason)s. Remove it or replace it.") % {"name": upload.name, "reason": upload.problem}))
        elif upload.status != UploadStatus.READY:
            problems.append((field, _("%(name)s is still being sent; wait until it is finished.") % {"name": upload.name}))
        else:
            out.append(upload)
    return out


def _which_faces(user, template, face_selector, reference, reference_uploads, problems: list) -> tuple[str, list[Upload]]:
    """The job's face selector (the user's choice, else the template's) and, for "reference", the
    photo of the person: sent with the form, or one sent ahead (then returned, to be claimed)."""
    selector = face_selector or (template.face_selector if template else "many")
    if selector not in FACE_SELECTORS:
        problems.append(("face_selector", _("Choose which faces to replace.")))
        return "many", []
    sent = _sent(user, reference_uploads, UploadKind.REFERENCE, "reference", problems)
    if selector != "reference":
        return selector, []
    if reference is not None:
        try:
            check_upload(reference, kind="image")
            check_face(reference)
        except UploadRejected as exc:
            problems.append(("reference", _("Reference photo %(name)s: %(reason)s") % {"name": reference.name, "reason": exc}))
        return selector, []
    if not reference_uploads:
        problems.append(("reference", _("Add a photo of the person whose face is replaced, or choose another option.")))
    elif len(reference_uploads) > 1:
        problems.append(("reference", _("Keep one reference photo only.")))
    return selector, sent[:1]


def _use_up(user, uploads: list[Upload]) -> None:
    """Delete the uploads' rows in the Start's transaction, all or none: a second Start given the
    same files at the same moment finds them gone and is refused, and never shares a file."""
    if uploads and Upload.objects.of(user).filter(pk__in=[u.pk for u in uploads]).delete()[0] != len(uploads):
        raise StartError(_("These files were just used by another Start; choose them again."), "targets")


def _checked_folder(user, profile, team, target_folder: str, problems: list) -> tuple[str, int | None]:
    """The folder, normalised, if a job for `team` may use it (the profile's folders and the team's,
    never another team's: jobs.clusters.team_roots) and it holds photos or videos (asked of the
    cluster), with how many (Start then holds them to the limits of one job: a folder over a limit
    was a failed job once); else a problem. A folder of another of the user's teams is answered with
    the team to choose. A cluster that does not answer is not the user's mistake: the folder is
    taken, its count unknown (None; jobs.job.submit counts it again)."""
    roots = team_roots.for_team(team, profile)
    try:
        target_folder = check_in_roots(target_folder, list(roots.allowed), roots.refused)
    except PathNotAllowed:
        if (theirs := team_roots.team_holding(user, target_folder, profile, team)) is not None:
            problems.append(("target_folder", _("%(folder)s is a folder of your team %(team)s. Choose the team "
                                                "%(team)s for this job, or pick another folder.") % {
                "folder": target_folder, "team": theirs.name}))
        else:  # with the folder it likely meant, when the cluster has it ("ux3/photos")
            problems.append(("target_folder", outside_words(target_folder, roots, cluster.runner_for(profile))
                             if settings.FOLDER_CHECK_ON_START else
                             _("That folder is outside the folders you may use. Pick one with the folder browser.")))
        return target_folder, None
    if not settings.FOLDER_CHECK_ON_START:
        return target_folder, None
    found = count_folder(profile, target_folder, roots)
    if found.problem:
        problems.append(("target_folder", found.problem))
    return target_folder, found.images + found.videos if found.ok and found.reachable else None


def _which_team(user, team, problems: list):
    """The team the job runs for: the one asked for, when it is one of the user's; without one, the
    default (Team.objects.default_for); None for a user in no team."""
    mine = Team.objects.of(user)
    if team in (None, ""):
        return mine.default_for(user)
    # The form hands a Team; the API its account, which may be all digits ("2024"): never read as an id.
    found = (mine.filter(pk=team.pk) if isinstance(team, Team) else mine.filter(slurm_account=str(team).strip())).first()
    if found is None:
        problems.append(("team", _("Choose one of your teams.")))
    return found


def _checked_callback(callback_url: str, problems: list) -> str:
    """The callback URL (stripped; "" for none) a program is called at when the job ends, if the
    portal may call it (jobs.webhooks.guard: http or https, no private address); else a problem."""
    callback_url = (callback_url or "").strip()
    if not callback_url:
        return ""
    if len(callback_url) > Job._meta.get_field("callback_url").max_length:
        problems.append(("callback_url", _("The callback URL is too long.")))
    elif problem := webhooks.check_callback_url(callback_url):
        problems.append(("callback_url", problem))
    return callback_url


def _named(f: UploadedFile, name: str | None = None) -> UploadedFile:
    f.name = safe_name(name or f.name)
    return f


def is_media_name(name: str) -> bool:
    return name.lower().endswith(MEDIA_EXTENSIONS)
