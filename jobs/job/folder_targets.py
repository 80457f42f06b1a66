"""A folder job's targets, listed on the cluster at submission (jobs.job.submit), and the fast
inserts of a new job's rows. A folder the submission cannot use fails the job with what to do.
"""
from __future__ import annotations

from django.db import connection, transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from cluster import PathNotAllowed, RemoteFileError, list_folder_in_roots
from jobs.clusters.team_roots import Roots
from jobs.errors import StartError, SubmitRejected
from jobs.job import again
from jobs.job.start import is_media_name
from jobs.models import Job, Target, TargetStatus
from jobs.models.job import PREVIEW_PHOTOS
from jobs.quotas import check_folder_targets
from jobs.uploads.content import safe_name, unique_name, without_hidden_characters
from worker.manifest import default_output_name, is_video_name

#: what a user does about a folder the submission cannot use (nothing ran; nothing is retried)
PICK_AGAIN = gettext_lazy("Nothing ran. Use Run again and pick the folder with the folder browser.")
#: a folder the cluster cannot list, by errno, in plain words
FOLDER_ERRORS = {2: gettext_lazy("it does not exist (check its name)"), 20: gettext_lazy("it is a file, not a folder"),
                 13: gettext_lazy("you may not read it")}


def targets_from_folder(runner, job: Job, chunk_size: int, roots: Roots) -> None:
    """List the job's folder on the cluster (in `roots`: the job's, jobs.clusters.team_roots; links
    resolved) and insert a target row per photo or video: the whole folder, its first photos for a
    preview, or the picked files."""
    try:
        # One command for the whole folder: every file is resolved on the cluster, and a link that
        # leads out of the roots, or into another team's folder, comes back refused (the worker
        # checks again before it opens one).
        listing = list_folder_in_roots(runner, job.target_folder, list(roots.allowed), refused=roots.refused)
    except PathNotAllowed:
        raise SubmitRejected(_("The folder %(folder)s is outside the folders you may use.") % {"folder": job.target_folder}
                             + " " + PICK_AGAIN) from None
    except RemoteFileError as exc:
        if exc.errno is None:  # not an answer about the folder: the cluster may answer later
            raise
        raise SubmitRejected(_("The folder %(folder)s cannot be read on the cluster: %(why)s.") % {
            "folder": job.target_folder, "why": FOLDER_ERRORS.get(exc.errno, FOLDER_ERRORS[2])} + " " + PICK_AGAIN) from None
    entries = [e for e in listing.entries if e.type == "file" and is_media_name(e.name) and not e.name.startswith(".")]
    entries = again.keep_picked(entries, job.picked)  # some files of it only (jobs.job.again)
    if job.picked and not entries:
        raise SubmitRejected(_("None of the chosen files is in the folder %(folder)s any more.") % {
            "folder": job.target_folder} + " " + PICK_AGAIN)
    if job.is_preview:  # its first photos, in the folder's order (jobs.job.preview)
        entries = [e for e in entries if not is_video_name(e.name) and not e.refused][:PREVIEW_PHOTOS]
        if not entries:
            raise SubmitRejected(_("A preview runs on photos, and the folder %(folder)s has none. Start the whole "
                                   "job instead.") % {"folder": job.target_folder})
    # Only now is the folder's target count known: the targets-per-job quota is checked here.
    # Its GPU-hours are NOT refused here (the job was accepted at Start); its estimate grows with
    # Job.total below and weighs on the owner's next Start (jobs.quotas).
    try:
        check_folder_targets(job.owner, len(entries), job.cluster)
    except StartError as exc:  # the cluster's or the user's limit of targets per job
        raise SubmitRejected(exc.message) from None
    used: set[str] = set()  # a.webm and a.mp4 would both write a.mp4
    # The worker reads `e.path`: where the file really is, links resolved. A refused link keeps its
    # own path, which the worker refuses as well; it stays in the list so that the user sees why.
    # Output names are short and plain (safe_name): a 254-byte name leaves no room for `-2` or for
    # the temporary names of a copy, on the cluster or in the portal.
    rows = [(i, e.name, e.path, unique_name(default_output_name(safe_name(e.name)), used), i // chunk_size)
            for i, e in enumerate(entries)]
    refused = [i for i, e in enumerate(entries) if e.refused]
    with transaction.atomic():
        insert_targets(job, rows)
        for first in range(0, len(refused), 500):
            Target.objects.filter(job=job, index__in=refused[first:first + 500]).update(
                status=TargetStatus.FAILED, message=_("skipped: it is a link that leads outside the folders you may use"))
        videos = sum(1 for e in entries if is_video_name(e.name))
        Job.objects.filter(pk=job.pk).update(total=len(rows), videos=videos)
    job.total, job.videos = len(rows), videos
    if refused:
        job.recount()


def job_id_param(job: Job):
    return Target._meta.get_field("job").get_db_prep_value(job.pk, connection)


def insert_targets(job: Job, rows: list[tuple[int, str, str, str, int]]) -> None:
    """Insert (index, name, cluster_path, output_name, task_index) rows. The name is shown, without
    hidden characters (jobs.uploads.content); the cluster path stays the file's own."""
    jid = job_id_param(job)
    insert_rows(Target, ["job_id", "index", "name", "cluster_path", "upload", "output_name", "task_index", "status",
                         "message", "faces_found", "faces_swapped", "output_file", "thumbnail_file"],
                [(jid, i, without_hidden_characters(name)[:500], path[:1000], "", out, task, TargetStatus.WAITING.value,
                  "", 0, 0, "", "")
                 for i, name, path, out, task in rows])


def insert_rows(model, cols: list[str], params: list[tuple]) -> None:
    """ONE parameterised executemany. The ORM's bulk_create spends ~0.6 s building and compiling
    1,000 rows on SQLite, more than all the SSH work of a Start; this keeps a 1,000-target Start
    close to a 10-target one. Only for fresh rows of a new job (no signals, no conflicts)."""
    q = connection.ops.quote_name
    sql = (f"INSERT INTO {q(model._meta.db_table)} ({', '.join(q(c) for c in cols)}) "
           f"VALUES ({', '.join(['%s'] * len(cols))})")
    with transaction.atomic(), connection.cursor() as cur:  # one commit, not one per row
        cur.executemany(sql, params)
