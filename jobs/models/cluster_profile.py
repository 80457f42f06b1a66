from __future__ import annotations

import posixpath

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from cluster import ClusterConfig
from jobs.bilingual import in_language
from jobs.secrets import EncryptedTextField
from worker.layout import JobFolder


def check_roots(value) -> None:
    """A list of absolute cluster folders: a profile's allowed target roots, a team's folders."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.startswith("/") for v in value):
        raise ValidationError(_("Give a list of absolute folder paths, e.g. [\"/srv/storage\"]."))
    for path in value:
        _check_bindable(path)


#: the name the migrations know it by (0001, 0030)
_check_roots = check_roots


def _check_bindable(path: str) -> None:
    # A template with a container image binds these folders into it (cluster.sbatch), and
    # Apptainer's --bind list uses ':' and ',' as separators: such a path could never be bound.
    if ":" in path or "," in path:
        raise ValidationError(_("A folder path may not contain ':' or ',' (containers list folders with them): "
                                "%(path)s") % {"path": path})


def _check_mapping(value) -> None:
    ok = isinstance(value, list) and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(s, str) and s.startswith("/") for s in p) for p in value
    )
    if not ok:
        raise ValidationError(_("Give a list of [portal path, cluster path] pairs of absolute paths."))


class ClusterProfile(models.Model):
    """How the portal reaches one Slurm cluster: SSH login, pinned host key, remote folders."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    name_zh = models.CharField(_("Chinese name (简体中文)"), max_length=100, blank=True, default="", db_default="",
                               help_text=_("Shown to people who read the portal in Chinese. Empty: they see the name above."))
    slug = models.SlugField(_("slug"), unique=True)
    host = models.CharField(_("SSH host"), max_length=255)
    port = models.PositiveIntegerField(_("SSH port"), default=22)
    username = models.CharField(_("SSH user"), max_length=64)
    # Encrypted in the database (jobs.secrets); read and written here as text.
    private_key = EncryptedTextField(_("SSH private key"),
                                     help_text=_("The service user's private key (OpenSSH or PEM text)."))
    known_hosts = models.TextField(
        _("pinned host key"),
        help_text=_("known_hosts line(s) of the login node, e.g. \"[login.example.org]:22 ssh-ed25519 AAAA...\". "
                    "Connections to a host whose key is not listed here are refused."),
    )
    work_root = models.CharField(_("remote work root"), max_length=500,
                                 help_text=_("Folder on the cluster where job folders (inputs, manifest, logs, outputs) are created."))
    target_roots = models.JSONField(_("allowed target roots"), default=list, validators=[check_roots],
                                    help_text=_("Cluster folders users may pick targets from."))
    path_mapping = models.JSONField(_("path mapping"), default=list, blank=True, validators=[_check_mapping],
                                    help_text=_("[portal path, cluster path] pairs where both see the same storage."))
    worker_python = models.CharField(_("worker Python"), max_length=500, default="python3",
                                     help_text=_("Python on the compute nodes that has the worker installed."))
    worker_path = models.CharField(_("worker folder"), max_length=500, blank=True,
                                   help_text=_("Folder holding the worker package (PYTHONPATH and working folder of tasks)."))
    models_dir = models.CharField(_("models folder"), max_length=500, blank=True, validators=[_check_bindable],
                                  help_text=_("Read-only folder with the insightface models on the cluster."))
    is_active = models.BooleanField(_("active"), default=True)
    max_targets_per_job = models.PositiveIntegerField(
        _("targets per job"), default=10_000,
        help_text=_("The most images and videos one job may have on this cluster, whoever starts it (a quota "
                    "may allow fewer). Bigger sets are split into several jobs."))
    node_boot_seconds = models.PositiveIntegerField(
        _("node wake-up time (seconds)"), default=120, validators=[MaxValueValidator(840)],
        help_text=_("With Slurm's power saving, how long a powered-down node takes to start and answer. People "
                    "see it as the wait when their work wakes a node, and GPU bookings wake their nodes this long "
                    "before they start."))

    # Read from `scontrol show config` at each submission: arrays are sized to fit them.
    max_array_size = models.PositiveIntegerField(_("Slurm MaxArraySize"), null=True, blank=True, editable=False)
    max_job_count = models.PositiveIntegerField(_("Slurm MaxJobCount"), null=True, blank=True, editable=False)
    #: the cluster's Slurm release ("24.11.5"), read with its GPUs (jobs.bookings.inventory): what
    #: its reservations can hold depends on it (cluster.reserves_gpus)
    slurm_release = models.CharField(_("Slurm release"), max_length=32, blank=True, editable=False)

    # Written by the watcher: what the page shows when the cluster cannot be reached.
    last_contact_at = models.DateTimeField(null=True, blank=True, editable=False)
    unreachable_since = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    #: the nodes as the watcher last read them (jobs.clusters.node_states): {"read_at", "nodes",
    #: "failed_since", "error"}; the admin's Clusters page and /metrics show it, never asking SSH
    node_states = models.JSONField(default=dict, blank=True, editable=False)

    class Meta:
        verbose_name = _("cluster profile")
        verbose_name_plural = _("cluster profiles")

    def __str__(self) -> str:
        return self.name

    @property
    def shown_name(self) -> str:
        """The name in the reader's language (jobs.bilingual)."""
        return in_language(self.name, self.name_zh)

    def cluster_config(self) -> ClusterConfig:
        return ClusterConfig(host=self.host, port=self.port, user=self.username,
                             private_key=self.private_key, known_hosts=self.known_hosts)

    def job_folder(self, job_id, account: str) -> JobFolder:
        """Where a job's files lie on this cluster (the layout is the worker's: worker/layout.py):
        `<work_root>/jobs/<job id>`, or for a team's job `<work_root>/teams/<account>/jobs/<job id>`,
        `account` being the Slurm account frozen on the job (Job.slurm_account): a job keeps its
        folder whatever happens to its team. The one place a job's folder is named (`Job.folder`)."""
        if not account:
            return JobFolder(posixpath.join(self.work_root, "jobs", str(job_id)))
        if account.strip(".") == "" or "/" in account:  # never a Slurm account (checked_account): never a folder
            raise ValueError(f"{account!r} cannot name a team's folder")
        return JobFolder(posixpath.join(self.work_root, "teams", account, "jobs", str(job_id)))
