from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from jobs.access import led_by, owned_by
from jobs.models.snapshot import TemplateSnapshot
from worker.choices import SUCCESS_STATUSES, TARGET_STATUSES
from worker.layout import JobFolder
from worker.manifest import is_video_name


class JobStatus(models.TextChoices):
    QUEUED = "queued", _("queued")
    SUBMITTING = "submitting", _("submitting")
    PENDING = "pending", _("waiting in the queue")
    RUNNING = "running", _("running")
    COMPLETED = "completed", _("completed")
    PARTIALLY_FAILED = "partially_failed", _("partially failed")
    FAILED = "failed", _("failed")
    CANCELLED = "cancelled", _("cancelled")
    LOST = "lost", _("lost")


#: states in which the cluster may still change the job (the watcher polls these)
ACTIVE_STATUSES = (JobStatus.SUBMITTING, JobStatus.PENDING, JobStatus.RUNNING)
FINAL_STATUSES = (JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.LOST)


#: what the pages call each target status; the statuses themselves are the worker's
#: (worker/choices.py), plus "waiting" before the worker has written any record
TARGET_STATUS_LABELS = {
    "waiting": _("waiting"), "running": _("processing"), "done": _("done"), "no_face": _("no face found"),
    "skipped": _("already done"), "failed": _("failed"), "cancelled": _("cancelled"),
}
#: "cancelled": never processed because the job was cancelled (the portal's own, like "waiting")
TargetStatus = models.TextChoices(
    "TargetStatus", [(s.upper(), (s, TARGET_STATUS_LABELS[s])) for s in ("waiting", *TARGET_STATUSES, "cancelled")])

OK_TARGET_STATUSES = tuple(TargetStatus(s) for s in sorted(SUCCESS_STATUSES))
#: the photos a preview runs on at most (jobs.job.preview): enough to judge a face, over in seconds
PREVIEW_PHOTOS = 3
#: a done photo whose result the worker's own look flagged (worker.selfcheck): "needs a look"
NEEDS_LOOK = models.Q(status=TargetStatus.DONE) & ~models.Q(self_check="")


def counted(target: "Target") -> dict[str, int]:
    """Which of the job's counts (`Job.recount`) one target is in: the same rules, for one row."""
    return {"done": int(target.status in OK_TARGET_STATUSES), "failed": int(target.status == TargetStatus.FAILED),
            "needs_look": int(target.status == TargetStatus.DONE and target.self_check != "")}


class JobQuerySet(models.QuerySet):
    def visible_to(self, user):
        """Every lookup of a job outside the admin goes through here: the user's own, and those of
        the teams they lead (jobs.access)."""
        return self.filter(owned_by(user, "owner") | led_by(user, "team"))

    def owned(self, user):
        """The user's own jobs only: their lists, and what only an owner may do (delete files,
        replace a target's file)."""
        return self.filter(owned_by(user, "owner"))


def reference_upload_to(instance: "Job", filename: str) -> str:
    return f"users/{instance.owner_id}/jobs/{instance.id}/reference/{filename}"


def job_media_dir(job: "Job") -> Path:
    return Path(settings.MEDIA_ROOT) / "users" / str(job.owner_id) / "jobs" / str(job.id)


class Job(models.Model):
    """One click of Start: sources + targets + template, submitted as ONE Slurm array job."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="jobs")
    name = models.CharField(_("name"), max_length=200, blank=True)
    template = models.ForeignKey("jobs.Template", on_delete=models.SET_NULL, null=True, related_name="jobs")
    template_snapshot = models.JSONField(default=dict)
    cluster = models.ForeignKey("jobs.ClusterProfile", on_delete=models.PROTECT, related_name="jobs")
    status = models.CharField(max_length=20, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True)
    #: plain-language reason shown on the page (why it failed, or why it is still waiting)
    error = models.TextField(blank=True)
    target_folder = models.CharField(max_length=1000, blank=True)
    #: the photo of the person whose faces are replaced, when the job swaps only faces like it
    #: (its snapshot's face_selector "reference"); empty otherwise
    reference_face = models.FileField(upload_to=reference_upload_to, max_length=500, blank=True)
    slurm_job_id = models.CharField(max_length=32, blank=True, db_index=True)
    cancel_requested = models.BooleanField(default=False)
    #: 1 for the first submission; each retry (jobs.job.retry) is a new attempt with its own Slurm job,
    #: recorded as a JobAttempt row (`job.attempts`)
    attempt = models.PositiveIntegerField(default=1, db_default=1)
    consent_at = models.DateTimeField(null=True, blank=True)
    callback_url = models.URLField(blank=True)
    #: "Try it on a few photos" (jobs.job.preview): the first photos of a job-to-be, run before it
    is_preview = models.BooleanField(default=False, db_default=False)
    #: the team it runs for (jobs.models.team), and that team's Slurm account, frozen at Start: every
    #: attempt is charged to the same account whatever happens to the team later ("": the service
    #: user's default account)
    team = models.ForeignKey("jobs.Team", on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs",
                             verbose_name=_("team"))
    slurm_account = models.CharField(max_length=30, blank=True, default="", db_default="")
    #: whether a team job's folder lies under its team's prefix (ClusterProfile.job_folder). False for
    #: team jobs started before team folders (migration 0032): their files stay where they were made.
    team_prefix = models.BooleanField(default=True)
    #: a folder job over some of its files only: their cluster paths (empty: the whole folder). Set
    #: when the results of an earlier job that need a look are tried again with another face photo
    #: (jobs.job.again); jobs.job.submit lists the folder and keeps only these.
    picked = models.JSONField(default=list, blank=True)
    #: the GPU booking whose Slurm reservation the job is submitted into (None: the open queue)
    booking = models.ForeignKey("jobs.Booking", on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="jobs", verbose_name=_("booking"))
    #: the language of the page (or API request) that started it: what the portal writes about the
    #: job later, in the background (why it waits or failed, each photo's message), is in it (jobs.words)
    language = models.CharField(max_length=16, blank=True, default="")
    total = models.PositiveIntegerField(default=0)
    #: how many of the targets are videos: counted once when the targets are made, so that no page
    #: counts a 1,000,000-target job's videos again (jobs.web.views.pages.media_words)
    videos = models.PositiveIntegerField(default=0, db_default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    #: done photos whose result the worker's own look flagged (Target.self_check): "needs a look"
    needs_look = models.PositiveIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    #: Slurm's own estimate of when a pending job starts (the backfill scheduler's, from squeue);
    #: None when Slurm has none or the job runs
    expected_start = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: when its pages last saw it change (a task or a photo moved), or a Cancel was asked: a job on
    #: the cluster that has not changed for longer than its tasks can run is checked against Slurm's
    #: accounting of all its attempts (jobs.watcher.reconcile)
    changed_at = models.DateTimeField(null=True, blank=True)
    #: the model files its tasks loaded, [{"name", "sha256"}], from their progress records (jobs.job.model_sets)
    models_used = models.JSONField(_("models used"), default=list, blank=True)
    #: the container image its tasks ran in, {"image": path on the cluster, "sha256"}, as checked
    #: when its latest attempt was submitted (jobs.job.container); {} when it ran without one
    container_image_used = models.JSONField(_("container image used"), default=dict, blank=True)
    #: retention (jobs.results.retention): when the owner was told the files go, when the portal's files went
    #: (the row stays as a tombstone), and when the job's folder on the cluster was removed
    retention_notice_at = models.DateTimeField(null=True, blank=True)
    files_deleted_at = models.DateTimeField(null=True, blank=True, db_index=True)
    cluster_files_deleted_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        # The job list and the API list page through a user's jobs newest first: without these,
        # SQLite sorts every job before it can skip to a late page.
        indexes = [models.Index(fields=["owner", "-created_at", "-id"], name="job_owner_newest"),
                   models.Index(fields=["-created_at", "-id"], name="job_newest"),
                   # a team lead's team page (jobs/web/views/teams.py): the team's jobs, newest first
                   models.Index(fields=["team", "-created_at", "-id"], name="job_team_newest")]
        # Opening another person's face photos and results in the admin (jobs.access, jobs/admin/faces.py).
        permissions = [("see_faces", _("Can see other people's face photos and results"))]

    def __str__(self) -> str:
        return self.name or str(self.id)

    @property
    def is_active(self) -> bool:
        return self.status in (JobStatus.QUEUED, *ACTIVE_STATUSES)

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    @property
    def media_dir(self) -> Path:
        return job_media_dir(self)

    @property
    def snapshot(self) -> TemplateSnapshot:
        """The template as it was at Start (`template_snapshot`, typed)."""
        return TemplateSnapshot.from_json(self.template_snapshot)

    @property
    def folder(self) -> JobFolder:
        """The job's folder on its cluster (manifest, sources, targets, outputs, progress, logs), under
        its team's account when it has one (ClusterProfile.job_folder): submission, retries, the
        watcher's fetches and the clean-up all read it here."""
        return self.cluster.job_folder(self.id, self.slurm_account if self.team_prefix else "")

    @property
    def slurm_name(self) -> str:
        """The Slurm job name: the job's uuid (and the attempt from the second on), so a retried
        submission finds this attempt's Slurm job and not an earlier attempt's."""
        return f"ffp-{self.id}" if self.attempt <= 1 else f"ffp-{self.id}-a{self.attempt}"

    def recount(self) -> bool:
        """Count done and failed targets from the rows (one query) and store them; True when they changed.

        The one place these counts are made: the watcher, the end of an attempt, a retry and the
        pages all read `done` / `failed` as this leaves them.
        """
        counts = Target.objects.filter(job=self).aggregate(
            done=models.Count("pk", filter=models.Q(status__in=OK_TARGET_STATUSES)),
            failed=models.Count("pk", filter=models.Q(status=TargetStatus.FAILED)),
            needs_look=models.Count("pk", filter=NEEDS_LOOK))
        if (counts["done"], counts["failed"], counts["needs_look"]) == (self.done, self.failed, self.needs_look):
            return False
        Job.objects.filter(pk=self.pk).update(**counts)
        self.done, self.failed, self.needs_look = counts["done"], counts["failed"], counts["needs_look"]
        return True


def source_upload_to(instance: "Source", filename: str) -> str:
    return f"users/{instance.job.owner_id}/jobs/{instance.job_id}/sources/{filename}"


def target_upload_to(instance: "Target", filename: str) -> str:
    return f"users/{instance.job.owner_id}/jobs/{instance.job_id}/targets/{filename}"


class Source(models.Model):
    """An uploaded photo of the person whose face goes in (several are averaged)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="sources")
    file = models.FileField(upload_to=source_upload_to, max_length=500)
    original_name = models.CharField(max_length=255)


class Target(models.Model):
    """One image or video to process. `index` is its position in the worker manifest."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="targets")
    index = models.PositiveIntegerField()
    name = models.CharField(max_length=500)  # what the user sees (relative path in the folder)
    cluster_path = models.CharField(max_length=1000, blank=True)  # where the cluster reads it
    upload = models.FileField(upload_to=target_upload_to, max_length=500, blank=True)
    output_name = models.CharField(max_length=500)  # file name under the job's outputs/
    task_index = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=TargetStatus.choices, default=TargetStatus.WAITING)
    message = models.TextField(blank=True)
    faces_found = models.PositiveIntegerField(default=0)
    faces_swapped = models.PositiveIntegerField(default=0)
    #: time spent on it: the whole run once it ended; for a video still running, the time so far
    seconds = models.FloatField(null=True, blank=True)
    #: a video's frames done and in all (from the worker's record as it goes; total may be an
    #: estimate, or unknown); both empty for a photo
    frames_done = models.PositiveIntegerField(null=True, blank=True)
    frames_total = models.PositiveIntegerField(null=True, blank=True)
    output_file = models.CharField(max_length=1000, blank=True)  # local path of the fetched output
    thumbnail_file = models.CharField(max_length=1000, blank=True)
    #: failed because its task died (out of memory, node failure, time limit ...), not for its own
    #: reasons (corrupt file, no face): only these are retried (jobs.job.retry)
    failed_with_task = models.BooleanField(default=False, db_default=False)
    #: when the watcher last asked for this output to be fetched (jobs.watcher.outputs); a fetch
    #: still outstanding after a while is asked for again
    fetch_asked_at = models.DateTimeField(null=True, blank=True)
    #: the worker's own look at the result (worker.selfcheck): "" when every swapped face took, else
    #: "not_taken" (still looks like the person in the photo) or "face_lost"; `self_check_faces`: how many
    #: of the `faces_swapped` did not take. Flagged results are "needs a look" on the job page.
    self_check = models.CharField(max_length=16, blank=True, default="", db_default="")
    self_check_faces = models.PositiveSmallIntegerField(default=0, db_default=0)

    class Meta:
        ordering = ["index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="unique_target_index")]
        # A big job's page counts and lists its targets by status ("failed only") a page at a time.
        # The watcher reads the targets of the tasks whose records changed, those whose output is
        # still to be fetched, and those that failed with their task (jobs.watcher.apply.target_rows):
        # each a few rows whatever the job's size, found through its own index.
        indexes = [models.Index(fields=["job", "status", "index"], name="target_job_status"),
                   models.Index(fields=["job", "task_index"], name="target_job_task"),
                   # (the columns the query tests, not only the job: SQLite's planner otherwise took
                   # target_job_status and walked every done target, 0.28 s at 1,000,000)
                   models.Index(fields=["job", "status", "output_file"], name="target_output_due",
                                condition=models.Q(status__in=OK_TARGET_STATUSES, output_file="")),
                   models.Index(fields=["job", "status", "failed_with_task"], name="target_failed_with_task",
                                condition=models.Q(status=TargetStatus.FAILED, failed_with_task=True))]

    @property
    def is_ok(self) -> bool:
        return self.status in OK_TARGET_STATUSES

    @property
    def is_video(self) -> bool:
        return is_video_name(self.name)

    @property
    def seconds_left(self) -> float | None:
        """About how long a running video still needs, from its pace so far; None when unknown."""
        return seconds_left(self.seconds, self.frames_done, self.frames_total)

    def frames_in_progress(self) -> dict | None:
        """A running video's `{"done", "total", "seconds"}` for the live page (its "frame 1,200 of
        1,800 · about 40 s left"); None for a photo, a video not started or no longer running."""
        if self.status != TargetStatus.RUNNING or not self.frames_done:
            return None
        return {"done": self.frames_done, "total": self.frames_total, "seconds": self.seconds}


def seconds_left(seconds: float | None, done: int | None, total: int | None) -> float | None:
    """The time a video still needs at the pace so far (`seconds` for `done` frames of `total`);
    None before its first frames or when its length is unknown. static/js/live/job_targets.js
    computes the same from the live snapshot."""
    if not seconds or not done or not total or done >= total:
        return None
    return seconds * (total - done) / done


class Task(models.Model):
    """One array index of a job; its state follows Slurm's (PENDING, RUNNING, OUT_OF_MEMORY ...)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="tasks")
    index = models.PositiveIntegerField()
    state = models.CharField(max_length=24, default="PENDING")
    node = models.CharField(max_length=100, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    reason = models.CharField(max_length=300, blank=True)  # plain words
    elapsed_seconds = models.PositiveIntegerField(null=True, blank=True)
    gpus = models.PositiveIntegerField(default=0)
    #: the job attempt whose Slurm job this row follows now (Job.attempt when it was last resubmitted)
    attempt = models.PositiveIntegerField(default=1, db_default=1)
    #: set when Slurm reports the task FAILED and its log has not been read yet: the next watcher
    #: cycle reads it (a memory kill or a GPU out-of-memory says so there) before the task is recorded
    log_wait_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="unique_task_index")]
        indexes = [models.Index(fields=["job", "state", "index"], name="task_job_state")]
