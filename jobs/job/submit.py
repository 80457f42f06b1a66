"""The RQ side of Start: stage inputs, write the manifest, render the sbatch script, submit.

`submit_job` is safe to run twice for the same job (RQ retries, a worker killed half-way): the
Slurm job name carries the job's uuid and is looked up in squeue/sacct before any sbatch, so a
job is never submitted twice; and a job is never lost: a cluster outage leaves it `submitting`
with a plain reason, and the RQ job is retried with backoff.
"""
from __future__ import annotations

import dataclasses
import json
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.translation import gettext as _

import cluster
from cluster import (
    ClusterError,
    ClusterLimits,
    CommandFailed,
    SbatchSpec,
    render_script,
    slurm,
)
from jobs import content_safety
from jobs.clusters import team_accounts, team_roots
from jobs.errors import SubmitRejected
from jobs.job import attempts, container, lifecycle
from jobs.job.folder_targets import PICK_AGAIN, insert_rows, job_id_param, targets_from_folder
from jobs.job.retry import REPLACEMENTS_DIR
from jobs.live.protocol import publish_job
from jobs.log_context import bind, log_context
from jobs.models import ClusterProfile, Job, JobStatus, Target, Task
from jobs.ops import metrics as ops_metrics
from jobs.words import in_language_of
from worker.layout import LOG_NAME_PATTERN
from worker.manifest import EngineOptions, Manifest, make_chunks
from worker.manifest import Target as ManifestTarget
from worker.modelset import ModelPin

log = logging.getLogger(__name__)

def submit_job(job_id: str) -> str | None:
    """Submit one job; returns the Slurm job id (None when there is nothing to do). What it says
    about the job (why it waits, why it was refused) is in the job's language."""
    job = Job.objects.select_related("cluster").get(pk=job_id)
    with in_language_of(job), log_context(job_id=str(job.id), slurm_job_id=job.slurm_job_id):
        return _submit(job)


def _submit(job: Job) -> str | None:
    if job.cancel_requested and not job.slurm_job_id:
        lifecycle.move(job, "cancel", finished_at=timezone.now())
        return None
    if job.is_final:
        return None
    if job.slurm_job_id:
        return job.slurm_job_id
    if not lifecycle.move(job, "claim"):
        return None
    profile = job.cluster
    try:
        runner = cluster.runner_for(profile)
        existing, limits = find_submitted(runner, job)
        if existing:
            log.info("job %s was already submitted as Slurm job %s: not submitting again", job.id, existing)
            slurm_id = existing
        else:
            # A missing container image fails the job here, before any task could fail on it.
            used = container.check_image(runner, job)
            team_accounts.ensure_account(runner, job)  # the team's Slurm account, before its first job there
            if used != job.container_image_used:
                Job.objects.filter(pk=job.pk).update(container_image_used=used)
            script_path = stage(runner, job, limits) if job.attempt <= 1 else stage_retry(runner, job)
            job.refresh_from_db(fields=["cancel_requested"])
            if job.cancel_requested:
                lifecycle.move(job, "cancel", only_from=(JobStatus.SUBMITTING,), finished_at=timezone.now())
                return None
            slurm_id = sbatch(runner, job, script_path)
    except SubmitRejected as exc:
        lifecycle.move(job, "reject", error=exc.message, finished_at=timezone.now())
        return None
    except ClusterError as exc:
        ops_metrics.ssh_error(profile.slug, "submit")
        next_try = next_submission_try()
        if next_try is False:
            # RQ has no try left: say so and end the job, rather than "retrying" forever.
            lifecycle.move(job, "reject", finished_at=timezone.now(), error=_(
                "Could not send this job to the cluster: %(why)s. Nothing ran; try again later with Run again.")
                % {"why": exc})
            log.warning("job %s: submission failed for the last time: %s", job.id, exc)
            return None
        # Visible on the page while RQ retries; the job stays `submitting`, never lost.
        if next_try is None:
            job.error = _("Waiting to submit: %(why)s.") % {"why": exc}
        else:
            job.error = _("Waiting to submit: %(why)s. Retrying automatically at %(time)s.") % {
                "why": exc, "time": page_time(next_try)}
        Job.objects.filter(pk=job.pk, status=JobStatus.SUBMITTING).update(error=job.error)
        publish_job(job)
        log.warning("job %s: submission failed, will retry: %s", job.id, exc)
        raise
    bind(slurm_job_id=slurm_id)  # the lines from here on name the Slurm job too
    # A retried job: this attempt's Slurm id goes into its record, and its reason stays on the page.
    why = attempts.record_submission(job, slurm_id)
    if not lifecycle.move(job, "submitted", slurm_job_id=slurm_id, submitted_at=timezone.now(), error=why):
        # Cancelled while sbatch ran: keep the id so nothing runs unseen, and stop it.
        Job.objects.filter(pk=job.pk).update(slurm_job_id=slurm_id)
        runner.run(slurm.scancel_argv([slurm_id]), timeout=30)
        return slurm_id
    if not existing:
        log.info("job %s submitted as Slurm job %s", job.id, slurm_id)
        ops_metrics.submitted(job)  # Start -> Slurm id, once per job (not for a re-found submission)
    job.refresh_from_db(fields=["cancel_requested"])
    if job.cancel_requested:
        runner.run(slurm.scancel_argv([slurm_id]), timeout=30)
    return slurm_id


def next_submission_try():
    """When RQ will run this submission again after the error being handled: a datetime, None when
    not run by RQ (unknown), False when RQ has no try left (the job must not say "retrying")."""
    from rq import get_current_job

    rq_job = get_current_job()
    if rq_job is None:
        return None
    if not rq_job.retries_left:
        return False
    return timezone.now() + timedelta(seconds=rq_job.get_retry_interval())


def page_time(when) -> str:
    """A time as the job page writes its dates (templates/jobs/job_detail.html: "Y-m-d H:i")."""
    return date_format(timezone.localtime(when), "Y-m-d H:i")


def find_submitted(runner, job: Job) -> tuple[str | None, ClusterLimits]:
    """The Slurm id of an earlier submission of this job (looked up by its unique name), and the
    cluster's array limits, in one round trip. The limits are also kept on the cluster profile."""
    squeue_res, sacct_res, config_res = runner.run_batch([
        slurm.squeue_argv(user=job.cluster.username), slurm.sacct_argv(name=job.slurm_name, start="now-30days"),
        slurm.scontrol_config_argv()])
    limits = slurm.parse_scontrol_config(config_res.stdout if config_res.rc == 0 else "")
    if config_res.rc == 0:
        ClusterProfile.objects.filter(pk=job.cluster_id).update(max_array_size=limits.max_array_size,
                                                                max_job_count=limits.max_job_count)
    existing = slurm.find_job_by_name(squeue_res.stdout if squeue_res.rc == 0 else "",
                                      sacct_res.stdout if sacct_res.rc == 0 else "", job.slurm_name)
    return existing, limits


def sbatch(runner, job: Job, script_path: str) -> str:
    """Submit the script; the Slurm job id. A refusal for good (a partition that does not exist, an
    array too large) fails the job with Slurm's words; anything else is retried (CommandFailed)."""
    res = runner.run(slurm.sbatch_argv(script_path), timeout=60)
    if res.rc == 0:
        return slurm.parse_sbatch_parsable(res.stdout)
    refusal = slurm.sbatch_refusal(res.stderr)
    if refusal:
        raise SubmitRejected(_("Slurm refused the job: %(why)s. Nothing ran; ask an admin to check the template "
                               "%(template)s.") % {"why": refusal, "template": job.snapshot.name})
    raise CommandFailed(f"sbatch failed on the cluster (exit status {res.rc}): {res.stderr.strip()[-300:]}",
                        res.rc, res.stderr)


def stage(runner, job: Job, limits: ClusterLimits) -> str:
    """Put sources and uploaded targets on the cluster, write manifest and script; returns the script path.

    Safe to run again after a failure half-way (RQ retries it): files are overwritten, the folder's
    targets are listed once, and the task rows are made anew."""
    snap = job.snapshot
    folder = job.folder
    for sub in folder.subdirs:
        runner.makedirs(sub)

    sources = []
    for i, src in enumerate(job.sources.all()):
        remote = folder.source(i, src.file.name)
        runner.put_file(src.file.path, remote)
        sources.append(remote)
    reference = None
    if snap.face_selector == "reference" and job.reference_face:
        reference = folder.reference(job.reference_face.name)
        runner.put_file(job.reference_face.path, reference)

    # Each target's task_index (index // chunk size) and cluster path were set when its row was made.
    roots = team_roots.for_job(job)  # the profile's folders and the job's team's; other teams' refused
    if job.target_folder and not job.targets.exists():
        targets_from_folder(runner, job, snap.chunk_size, roots)
    # Plain tuples, not model instances: building 1,000 Target objects would dominate a big Start.
    targets = list(job.targets.order_by("index").values_list("cluster_path", "output_name", "upload"))
    if not targets:
        raise SubmitRejected(_("The folder %(folder)s has no images or videos in it.") % {"folder": job.target_folder}
                             + " " + PICK_AGAIN)
    # More tasks than the cluster allows one array: bigger chunks, the same targets.
    chunk_size = slurm.chunk_size_for(len(targets), snap.chunk_size, limits)
    if chunk_size != snap.chunk_size:
        Target.objects.filter(job=job).update(task_index=F("index") / chunk_size)
        log.info("job %s: %s targets in chunks of %s (the cluster allows %s tasks per job)", job.id, len(targets),
                 chunk_size, limits.max_tasks)
    chunks = make_chunks(len(targets), chunk_size)
    for cluster_path, _out, upload in targets:
        if upload:
            runner.put_file(str(Target.upload.field.storage.path(upload)), cluster_path)
    manifest = Manifest(
        job=str(job.id), sources=tuple(sources),
        targets=tuple(ManifestTarget(path=path, output=out) for path, out, _upload in targets),
        chunks=tuple(tuple(c) for c in chunks), output_dir=folder.out,
        # max_pixels: the portal's limit, so the worker refuses what the upload check would
        engine=EngineOptions(name=snap.engine, face_selector=snap.face_selector, reference_face=reference,
                             max_pixels=settings.MEDIA_MAX_PIXELS),
        # The worker checks every target against them again right before opening it (storage
        # can change between the listing and the run): inside the roots, outside other teams' folders.
        target_roots=roots.allowed, refused_roots=roots.refused,
        # Issue 14: the template's visible watermark and pinned model set, as frozen at Start.
        watermark=snap.watermark, models=ModelPin.from_dict(snap.model_set) if snap.model_set else None,
        safety=content_safety.manifest_spec(),  # the content check of every result, when an admin turned it on
        self_check=bool(snap.self_check),
    )
    runner.put_bytes(manifest.dumps().encode(), folder.manifest)

    with transaction.atomic():  # a retried staging makes the rows anew, never twice
        Task.objects.filter(job=job).delete()
        insert_rows(Task, ["job_id", "index", "state", "node", "reason", "gpus"],
                    [(job_id_param(job), n, "PENDING", "", "", 0) for n in range(len(chunks))])
    script = render_script(sbatch_spec(job, len(chunks)))
    runner.put_bytes(script.encode(), folder.script(1))
    return folder.script(1)


def stage_retry(runner, job: Job) -> str:
    """A later attempt: the first attempt's manifest stays valid; only a new script over the chunks
    to retry is written, and those chunks' old progress records are removed so that the watcher
    never reads the previous attempt's records as this attempt's. Returns the script path."""
    folder = job.folder
    indexes = [int(i) for i in attempts.latest(job).indexes]
    records = [folder.progress_record(i) for i in indexes]
    for start in range(0, len(records), 500):
        runner.run(["rm", "-f", "--", *records[start:start + 500]], timeout=60, check=True)
    stage_replacements(runner, job, indexes)
    script = render_script(sbatch_spec(job, indexes=indexes))
    runner.put_bytes(script.encode(), folder.script(job.attempt))
    return folder.script(job.attempt)


def stage_replacements(runner, job: Job, indexes: list[int]) -> None:
    """Files the user replaced (jobs.job.retry.replace_file) in the chunks `indexes`: each is put in the
    job's own folder on the cluster (never the user's folder) and the manifest is pointed at it."""
    replaced = list(job.targets.filter(task_index__in=indexes, upload__contains=REPLACEMENTS_DIR)
                    .values_list("index", "cluster_path", "upload"))
    if not replaced:
        return
    for _index, cluster_path, upload in replaced:
        runner.put_file(str(Target.upload.field.storage.path(upload)), cluster_path)
    manifest = Manifest.from_dict(json.loads(runner.get_bytes(job.folder.manifest)))
    paths = {index: cluster_path for index, cluster_path, _upload in replaced}
    targets = tuple(ManifestTarget(path=paths.get(i, t.path), output=t.output) for i, t in enumerate(manifest.targets))
    runner.put_bytes(dataclasses.replace(manifest, targets=targets).dumps().encode(), job.folder.manifest)
    log.info("job %s: %s replaced file(s) staged", job.id, len(replaced))


def sbatch_spec(job: Job, n_tasks: int | None = None, indexes: list[int] | None = None) -> SbatchSpec:
    """The batch script's spec: the whole array (`n_tasks`), or a retry's `indexes` (`--array=3,17,42`)."""
    profile, snap = job.cluster, job.snapshot
    folder = job.folder
    # In a container the image's own Python and worker run (its PATH and PYTHONPATH); outside, the
    # profile's venv Python with the portal's code on PYTHONPATH.
    image = snap.container_image
    command = ["python" if image else profile.worker_python, "-m", "worker", "run", "--manifest", folder.manifest]
    if profile.models_dir:
        command += ["--models-dir", profile.models_dir]
    env = {"PYTHONPATH": profile.worker_path} if profile.worker_path and not image else {}
    # Tests only (settings.FFP_TEST_ALLOCATE_MB, {attempt: MB}, empty by default and never read
    # from the environment): make the worker hold that much memory, to exceed the task's --mem.
    test_mb = (getattr(settings, "FFP_TEST_ALLOCATE_MB", None) or {}).get(job.attempt)
    if test_mb:
        env["FFP_TEST_ALLOCATE_MB"] = str(int(test_mb))
    # What the container sees: the models and the targets' folders (the profile's, and the team
    # folder the job's folder lies in) read-only, the job folder (sources, uploaded targets, outputs,
    # progress records) writable, each at the same path.
    binds = [f"{root}:{root}:ro" for root in
             [profile.models_dir, snap.model_set.get("folder", ""), *team_roots.container_folders(job)] if root]
    binds.append(f"{folder.root}:{folder.root}")
    return SbatchSpec(
        job_name=job.slurm_name, comment=job.slurm_name, partition=snap.partition, time_limit=snap.time_limit,
        cpus_per_task=snap.cpus_per_task, mem=attempts.current_mem(job), gres=snap.gres,
        array_indexes=list(indexes) if indexes is not None else list(range(n_tasks)),
        array_limit=snap.array_limit, log_dir=folder.logs, log_name=LOG_NAME_PATTERN,
        workdir=folder.root if image else profile.worker_path or folder.root, command=command, env=env, qos=snap.qos,
        # Into the booking's Slurm reservation when the job has one that still exists on the cluster.
        reservation=job.booking.reservation_name if job.booking_id and job.booking.reservation_made else "",
        account=job.slurm_account,  # the team's (jobs.models.team): fair share and accounting per team
        # Preempted by urgent work, a task goes back to the queue; its rerun skips finished targets.
        requeue=True,
        container_image=image, container_binds=binds if image else [],
    )


def cancel_on_cluster(job_id: str) -> None:
    """scancel what exists; the watcher records `cancelled` from Slurm's answer."""
    job = Job.objects.select_related("cluster").get(pk=job_id)
    if job.is_final:
        return
    if not job.slurm_job_id:
        # queued: cancel now; submitting: submit_job sees cancel_requested before and after sbatch.
        lifecycle.move(job, "cancel", only_from=(JobStatus.QUEUED,), finished_at=timezone.now())
        return
    runner = cluster.runner_for(job.cluster)
    runner.run(slurm.scancel_argv([job.slurm_job_id]), timeout=30)
