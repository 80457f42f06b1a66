"""Retry only what failed: a new attempt of the same job over just the chunks that hold failed targets.

Which targets are retried:
- by the user (Retry button, `POST /api/v1/jobs/<id>/retry`, any ended job but a completed one):
  every target that failed or was cancelled, or never got a result (a lost job). One that failed
  for its own reasons (a damaged file) is retried too: its file may have been replaced since
  (`replace_file`), and otherwise the user asked. No face found is not a failure.
  A damaged file in the user's own CLUSTER folder is the exception: nothing can be uploaded in its
  place, so it is taken again only once it has changed since the last attempt began (exported
  again into the folder; `still_damaged` asks the cluster); otherwise Retry says so instead of
  making an attempt that fails the same way.
- by the watcher (`auto_retry`): only targets whose TASK died (out of memory, node failure), never
  one that failed for its own reasons, which would fail again.
The manifest of the first attempt stays valid: the new attempt is ONE sbatch with `--array=<the
chunks holding those targets>`, and the worker skips the targets of those chunks whose output
already exists. A replaced file is staged anew and the manifest points at it (jobs.job.submit.stage_retry).

Who retries:
- the user, as above;
- the watcher, once, when an attempt ends (`auto_retry`, before `finish_job` decides the end):
  tasks that ran OUT_OF_MEMORY are resubmitted with twice the memory, capped at the template's
  `max_mem` (empty: twice its memory); tasks that ended NODE_FAIL are resubmitted as they were.
  TIMEOUT is never retried automatically: its reason tells the user to choose a longer template.

Every state change is conditional (`Job.move`), so two clicks, or a click racing the watcher,
make one attempt. The submission itself is `jobs.job.submit.submit_job` through RQ, which finds an
attempt already submitted by its Slurm name (`Job.slurm_name` names the attempt).
"""
from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Q
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

import cluster
from cluster import ClusterError, is_terminal
from jobs import audit
from jobs.background import enqueue
from jobs.errors import UploadRejected
from jobs.job import attempts, lifecycle
from jobs.models import Job, JobAttempt, JobStatus, Target, TargetStatus, Task
from jobs.results.target_words import WORDS
from jobs.uploads.content import check_upload, safe_name
from worker.manifest import IMAGE_EXTENSIONS, is_video_name

log = logging.getLogger(__name__)

#: final states a user may retry from
RETRYABLE_JOB_STATUSES = lifecycle.TRANSITIONS["retry"].sources
#: task end states the watcher resubmits by itself, once each, and the kind the attempt records for
#: each (`JobAttempt.kinds`: what `attempts.kinds_retried_automatically` reads back)
AUTO_RETRY_STATES = {"OUT_OF_MEMORY": "oom", "NODE_FAIL": "node_fail"}

#: what a user's Retry takes: everything not done (see the module's docstring)
USER_RETRYABLE = (TargetStatus.WAITING, TargetStatus.RUNNING, TargetStatus.FAILED, TargetStatus.CANCELLED)


def is_retryable(target: Target, auto: bool = False) -> bool:
    """Whether a Retry takes this target: the user's (`auto` False) or the watcher's."""
    if not auto:
        return target.status in USER_RETRYABLE
    if target.status in (TargetStatus.WAITING, TargetStatus.RUNNING):
        return True
    return target.status == TargetStatus.FAILED and target.failed_with_task


def _retryable(auto: bool = False) -> Q:
    """`is_retryable` as a query."""
    if not auto:
        return Q(status__in=USER_RETRYABLE)
    return Q(status__in=(TargetStatus.WAITING, TargetStatus.RUNNING)) | Q(status=TargetStatus.FAILED,
                                                                          failed_with_task=True)


def has_retryable_targets(job: Job) -> bool:
    """Whether the user's Retry would take anything: one EXISTS query (the job page asks on every view)."""
    return Target.objects.filter(job=job).filter(_retryable()).exists()


def retryable_targets(job: Job, task_indexes=None, auto: bool = False) -> list[Target]:
    targets = Target.objects.filter(job=job).filter(_retryable(auto)).order_by("index")
    if task_indexes is not None:
        targets = targets.filter(task_index__in=list(task_indexes))
    return list(targets)


def retry_failed(job: Job, actor=None, request=None, *, task_indexes=None, mem: str | None = None, why: str = "",
                 auto: bool = False, kinds: tuple[str, ...] = ()) -> bool:
    """Resubmit the job's retryable targets as a new attempt. True when an attempt was made.

    `task_indexes` limits the retry to those chunks (the automatic policy); `mem` asks for more
    memory per task; `auto` marks a retry the watcher made (from `pending`/`running`, before the
    job was finalised) rather than the user (from a final state), and `kinds` what it answers.
    """
    # asked of the cluster before the transaction: no lock is held while SSH answers
    unchanged = set() if auto else {t.pk for t in still_damaged(job)}
    with transaction.atomic():
        job.refresh_from_db()
        if job.status not in (lifecycle.TRANSITIONS["auto_retry" if auto else "retry"].sources) \
                or (job.cancel_requested and auto):
            return False
        targets = retryable_targets(job, task_indexes, auto=auto)
        targets = [t for t in targets if t.pk not in unchanged]
        if not targets:
            return False
        task_rows = list(job.tasks.all())
        # A lost job's tasks never ended: rerun them too (the worker skips what is done), or the
        # new attempt could never end.
        indexes = sorted({t.task_index for t in targets} | {t.index for t in task_rows if not is_terminal(t.state)})
        new_attempt = job.attempt + 1
        new_mem = mem or attempts.current_mem(job)
        by = "" if auto or actor is None else actor.get_username()
        if not job.attempts.exists():  # the first retry: record the first run too
            JobAttempt.objects.create(job=job, number=1, slurm_job_id=job.slurm_job_id, mem=job.snapshot.mem,
                                      indexes=[t.index for t in task_rows] or indexes,
                                      at=job.submitted_at or job.created_at)
        JobAttempt.objects.filter(job=job, number=job.attempt).update(
            ended={str(t.index): t.state for t in task_rows if t.attempt == job.attempt})
        JobAttempt.objects.filter(job=job, number=job.attempt, slurm_job_id="").update(slurm_job_id=job.slurm_job_id)
        record = JobAttempt.objects.create(job=job, number=new_attempt, indexes=indexes, mem=new_mem, why=why,
                                           auto=auto, by=by, kinds=list(kinds))
        note = why or ngettext("Retrying %(n)s photo or video (attempt %(attempt)s).",
                               "Retrying %(n)s photos and videos (attempt %(attempt)s).", len(targets)) % {
            "n": len(targets), "attempt": new_attempt}
        if not lifecycle.move(
                job, "auto_retry" if auto else "retry", attempt=new_attempt, slurm_job_id="", finished_at=None,
                error=note, cancel_requested=False, audit_action="job.retry", actor=None if auto else actor,
                request=request, details={"attempt": new_attempt, "array": record.array, "targets": len(targets),
                                          "mem": new_mem, "auto": auto, "why": why}):
            transaction.set_rollback(True)  # lost a race: the attempt row goes too
            return False
        Target.objects.filter(pk__in=[t.pk for t in targets]).update(
            status=TargetStatus.WAITING, message="", failed_with_task=False, faces_found=0, faces_swapped=0, seconds=None)
        Task.objects.filter(job=job, index__in=indexes).update(
            state="PENDING", attempt=new_attempt, node="", exit_code=None, reason="", elapsed_seconds=None,
            log_wait_since=None)
        job.recount()
        transaction.on_commit(lambda: enqueue.enqueue_submission(job))
    log.info("job %s: attempt %s over tasks %s (%s targets, mem %s, %s)", job.id, new_attempt, record.array,
             len(targets), new_mem or "default", "automatic" if auto else f"by {by}")
    return True


def auto_retry(job: Job, task_rows: list[Task]) -> bool:
    """The automatic policy, when all of an attempt's tasks ended and before `finish_job`.

    Once per job and kind: OUT_OF_MEMORY -> twice the memory up to the template's ceiling;
    NODE_FAIL -> the same again. Returns True when a new attempt was made (do not finalise).
    """
    if job.cancel_requested:
        return False
    current = [t for t in task_rows if t.attempt == job.attempt]
    done_before = attempts.kinds_retried_automatically(job)
    retry: set[int] = set()
    whys, kinds = [], []
    mem = None
    for state, kind in AUTO_RETRY_STATES.items():
        indexes = {t.index for t in current if t.state == state}
        if not indexes or kind in done_before:
            continue
        if kind == "oom":  # only while the template's ceiling leaves more memory to give
            mem = attempts.more_memory(job)
            if not mem:
                continue
            whys.append(_("ran out of memory; retried automatically with %(mem)s") % {"mem": mem})
        else:
            whys.append(_("a compute node failed; retried automatically"))
        retry |= indexes
        kinds.append(kind)
    if not retry:
        return False
    why = "; ".join(whys)
    why = why[:1].upper() + why[1:] + "."
    return retry_failed(job, task_indexes=retry, mem=mem, why=why, auto=True, kinds=tuple(kinds))


def retry_refusal(job: Job) -> str:
    """Why Retry did nothing, in words (the page and the API say the same)."""
    job.refresh_from_db()
    if not job.is_final:
        return _("This job is still %(status)s; retry once it has ended.") % {"status": job.get_status_display()}
    if not job.failed and job.status == JobStatus.COMPLETED:
        return _("Every photo and video of this job is done; there is nothing to retry.")
    damaged = damaged_in_folder(job)
    if damaged and len(damaged) == len(retryable_targets(job)):  # only those, and none changed (retry_failed)
        return ngettext("%(n)s damaged file is still the same: export it again into %(folder)s first, then choose "
                        "Retry failed.",
                        "%(n)s damaged files are still the same: export them again into %(folder)s first, then "
                        "choose Retry failed.", len(damaged)) % {"n": len(damaged), "folder": job.target_folder}
    return _("Nothing to retry: every photo and video of this job is done.")


#: seconds the cluster may take to say when the damaged files last changed
RECHECK_TIMEOUT_S = 15


def damaged_in_folder(job: Job) -> list[Target]:
    """The failed targets of a folder job whose file is damaged (what the watcher wrote of them:
    jobs.results.target_words, "damaged_in_folder", in any of the site's languages)."""
    if not job.target_folder:
        return []
    failed = Target.objects.filter(job=job, status=TargetStatus.FAILED, failed_with_task=False).order_by("index")
    return [t for t in failed if any(p.fullmatch(t.message) for p in _damaged_patterns())]


@functools.cache
def _damaged_patterns() -> tuple[re.Pattern, ...]:
    out = []
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            words = re.escape(_(WORDS["damaged_in_folder"]))
        for value in ("name", "folder"):
            words = words.replace(re.escape(f"%({value})s"), ".+")
        out.append(re.compile(words, re.DOTALL))
    return tuple(out)


def still_damaged(job: Job) -> list[Target]:
    """The damaged files of a folder job (`damaged_in_folder`) that have not changed since its last
    attempt was submitted: the cluster is asked when each was last written. A cluster that does
    not answer, or a file it cannot say, counts as changed: that is not the user's mistake."""
    damaged = damaged_in_folder(job)
    if not damaged or job.submitted_at is None:
        return []
    paths = [t.cluster_path for t in damaged]
    try:
        answer = cluster.runner_for(job.cluster).run(changed_at_command(paths), timeout=RECHECK_TIMEOUT_S)
    except ClusterError as exc:
        log.info("job %s: damaged files not re-checked: %s", job.id, exc)
        return []
    changed_at = parse_changed_at(answer.stdout)
    since = job.submitted_at.timestamp()
    return [t for t in damaged if t.cluster_path in changed_at and changed_at[t.cluster_path] <= since]


def changed_at_command(paths: list[str]) -> list[str]:
    """`stat`'s argument list for when each of `paths` was last written: "<seconds> <path>", each
    ended by a NUL (a file name may hold a line break)."""
    return ["stat", "--printf", "%Y %n\\0", "--", *paths]


def parse_changed_at(stdout: str) -> dict[str, int]:
    """{path: seconds since the epoch} from `changed_at_command`'s output (missing files are absent)."""
    out = {}
    for entry in stdout.split("\0"):
        seconds, _sep, path = entry.partition(" ")
        if path and seconds.isdigit():
            out[path] = int(seconds)
    return out


#: where replaced files are kept, under the job's private media folder (and how stage_retry knows them)
REPLACEMENTS_DIR = "/replacements/"
#: the target statuses whose file may be replaced
REPLACEABLE = (TargetStatus.FAILED, TargetStatus.CANCELLED)


def _kind(name: str) -> str | None:
    return "video" if is_video_name(name) else "photo" if name.lower().endswith(IMAGE_EXTENSIONS) else None


def replace_file(target: Target, upload: UploadedFile, actor=None, request=None) -> None:
    """Keep `upload` as the file `target` is read from on the next Retry. Raises UploadRejected.

    Checked like any upload (`check_upload`), and of the same kind as the file it replaces (its
    output keeps its name). Stored privately in the job's media folder; `stage_retry` puts it in the
    job's own folder on the cluster, never in the user's folder, and points the manifest at it.
    """
    job = target.job
    if job.is_active or target.status not in REPLACEABLE:
        raise UploadRejected(_("Only a photo or video that failed or was cancelled can be replaced, once the job "
                               "has ended."))
    name = safe_name(upload.name or "")
    if _kind(name) is None or _kind(name) != _kind(target.name):
        raise UploadRejected(_("Replace a photo with a photo, and a video with a video."))
    check_upload(upload, kind="media")
    stored = f"{REPLACEMENTS_DIR.strip('/')}/{target.index}/{name}"
    folder = job.media_dir / REPLACEMENTS_DIR.strip("/") / str(target.index)
    _write_private(upload, folder, name)
    relative = str((job.media_dir / stored).relative_to(settings.MEDIA_ROOT))
    old = target.upload.name if REPLACEMENTS_DIR in (target.upload.name or "") else ""
    Target.objects.filter(pk=target.pk).update(
        upload=relative, cluster_path=job.folder.target(f"replacement-{target.index}-{name}"),
        message=_("Replaced by %(name)s: use Retry to process it.") % {"name": name})
    if old and old != relative:
        (Path(settings.MEDIA_ROOT) / old).unlink(missing_ok=True)
    audit.record(actor, "target.replace", target=job, request=request,
                 details={"index": target.index, "name": name, "size": upload.size})
    log.info("job %s: target %s replaced by %s (%s bytes)", job.id, target.index, name, upload.size)


def _write_private(upload: UploadedFile, folder: Path, name: str) -> None:
    """Write the upload as folder/name: the folder (and the job's folders above it) 700, the file 600."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for part in (folder, folder.parent):
        os.chmod(part, 0o700)
    for old in folder.iterdir():  # one replacement per target
        old.unlink()
    fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        upload.seek(0)
        for chunk in upload.chunks():
            out.write(chunk)
