"""Figures read at scrape time: a few aggregate queries and Redis counts, never SSH.

Each is a prometheus_client custom collector, registered on the registry a scrape builds
(jobs.ops.views), so the figures come once per scrape from the one database, however many processes
serve /metrics. A collector that cannot read (the database or Redis down) yields nothing and sets
`ffportal_scrape_error{collector=...}` to 1; the rest of the scrape still answers.

What the queries cost: jobs by status and bookings by state use their indexed state columns; the
targets are counted only for jobs still in work (ACTIVE_STATUSES and queued), through the
(job, status) index; images per second reads the targets of jobs that ran in the last
IMAGES_WINDOW. GPU-hours are one SUM over the usage records (one row per finished job); per team,
the stored rows of Slurm's accounting (two months, a row per team and cluster).
"""
from __future__ import annotations

import logging
import time
from datetime import timedelta

from prometheus_client.core import GaugeMetricFamily

log = logging.getLogger(__name__)

#: how far back "images per second" looks: targets of jobs that finished within it, or still run
IMAGES_WINDOW = timedelta(hours=1)


class _Safe:
    """Runs `figures()`; a failure is logged and reported as a scrape error, not raised."""

    name = ""

    def collect(self):
        error = GaugeMetricFamily("ffportal_scrape_error", "1 when a collector could not read its source.",
                                  labels=["collector"])
        try:
            yield from self.figures()
            error.add_metric([self.name], 0)
        except Exception:
            log.warning("metrics: %s collector failed", self.name, exc_info=True)
            error.add_metric([self.name], 1)
        yield error

    def figures(self):
        raise NotImplementedError


class DatabaseCollector(_Safe):
    """Jobs and targets by state, bookings by state, GPU-hours charged, images per second per template."""

    name = "database"

    def figures(self):
        from django.db.models import Count, Sum
        from django.utils import timezone

        from jobs.models import Booking, Job, JobStatus, Target, TargetStatus, UsageRecord
        from jobs.models.booking import BookingState
        from jobs.models.job import ACTIVE_STATUSES
        from jobs.usage.accounting import month_of

        jobs = GaugeMetricFamily("ffportal_jobs", "Jobs by state.", labels=["state"])
        counts = dict(Job.objects.order_by().values_list("status").annotate(n=Count("pk")))
        for state in JobStatus.values:
            jobs.add_metric([state], counts.get(state, 0))
        yield jobs

        in_work = (JobStatus.QUEUED, *ACTIVE_STATUSES)
        targets = GaugeMetricFamily("ffportal_targets", "Targets (images, videos) of jobs still in work, by state.",
                                    labels=["state"])
        rows = dict(Target.objects.filter(job__status__in=in_work).order_by().values_list("status")
                    .annotate(n=Count("pk")))
        for state in TargetStatus.values:
            targets.add_metric([state], rows.get(state, 0))
        yield targets

        bookings = GaugeMetricFamily("ffportal_bookings", "GPU bookings by state.", labels=["state"])
        counts = dict(Booking.objects.order_by().values_list("state").annotate(n=Count("pk")))
        for state in BookingState.values:
            bookings.add_metric([state], counts.get(state, 0))
        yield bookings

        now = timezone.now()
        # the month quotas and the usage page count: the site's (TIME_ZONE), not UTC's
        month = month_of(now)
        total = UsageRecord.objects.aggregate(s=Sum("gpu_seconds"))["s"] or 0.0
        this_month = UsageRecord.objects.filter(period=month).aggregate(s=Sum("gpu_seconds"))["s"] or 0.0
        hours = GaugeMetricFamily("ffportal_gpu_hours_charged", "GPU-hours charged to users (Slurm accounting).",
                                  labels=["period"])
        hours.add_metric(["all"], total / 3600.0)
        hours.add_metric(["this_month"], this_month / 3600.0)
        yield hours

        yield from images_per_second(now)
        yield from team_gpu_hours(month)


def team_gpu_hours(month):
    """Per team account and cluster, this month's and last month's GPU-hours as Slurm's accounting
    last said (the stored TeamUsage rows, read every 10 minutes; jobs.usage.team_usage). A cluster
    never read for a month has no series, rather than a zero nobody measured."""
    from jobs.models import TeamUsage

    last = (month.replace(day=1) - timedelta(days=1)).replace(day=1)
    family = GaugeMetricFamily("ffportal_team_gpu_hours",
                               "GPU-hours of each team's Slurm account per cluster, from the cluster's own "
                               "accounting (sacct), in the portal's month.", labels=["team", "cluster", "month"])
    rows = (TeamUsage.objects.filter(month__in=(month, last)).order_by("team__slurm_account", "cluster__slug")
            .values_list("team__slurm_account", "cluster__slug", "month", "gpu_seconds"))
    for account, slug, period, seconds in rows:
        family.add_metric([account, slug, "this" if period == month else "last"], seconds / 3600.0)
    yield family


def images_per_second(now):
    """Per template: images done / seconds the worker spent on them (its progress records,
    `Target.seconds`), for photos of jobs running now or finished within IMAGES_WINDOW. This is
    one GPU task's pace; a job with N tasks running at once goes about N times faster."""
    from django.db.models import Count, Q, Sum

    from jobs.models import Job, JobStatus, Target, Template
    from jobs.models.job import OK_TARGET_STATUSES

    recent = Job.objects.filter(Q(status=JobStatus.RUNNING) | Q(finished_at__gte=now - IMAGES_WINDOW))
    rows = (Target.objects.filter(job__in=recent.values("pk"), status__in=OK_TARGET_STATUSES, seconds__gt=0,
                                  frames_total__isnull=True, frames_done__isnull=True)
            .order_by().values_list("job__template_id").annotate(n=Count("pk"), s=Sum("seconds")))
    rows = list(rows)
    slugs = dict(Template.objects.filter(pk__in=[r[0] for r in rows if r[0]]).values_list("pk", "slug"))
    rate = GaugeMetricFamily("ffportal_template_images_per_second",
                             "Images per second of one GPU task, per template, from the worker's progress records "
                             "(photos of jobs running or finished in the last hour).", labels=["template"])
    measured = GaugeMetricFamily("ffportal_template_images_measured",
                                 "Images the per-template rate was measured on.", labels=["template"])
    for template_id, n, seconds in rows:
        slug = slugs.get(template_id, "(deleted)")
        rate.add_metric([slug], n / seconds if seconds else 0.0)
        measured.add_metric([slug], n)
    yield rate
    yield measured


class QueueCollector(_Safe):
    """RQ: jobs waiting in each queue, running, and failed (rq's registries: counts, no job read)."""

    name = "rq"

    def figures(self):
        import django_rq
        from django.conf import settings
        from rq.registry import FailedJobRegistry, StartedJobRegistry

        depth = GaugeMetricFamily("ffportal_rq_queue_depth", "RQ jobs waiting in the queue.", labels=["queue"])
        started = GaugeMetricFamily("ffportal_rq_started_jobs", "RQ jobs a worker runs now.", labels=["queue"])
        failed = GaugeMetricFamily("ffportal_rq_failed_jobs", "RQ jobs in the failed registry (kept a week).",
                                   labels=["queue"])
        for name in settings.RQ_QUEUES:
            queue = django_rq.get_queue(name)
            depth.add_metric([name], queue.count)
            started.add_metric([name], StartedJobRegistry(queue=queue).count)
            failed.add_metric([name], FailedJobRegistry(queue=queue).count)
        yield depth
        yield started
        yield failed


class WatcherCollector(_Safe):
    """Seconds since the watcher's last cycle, per active cluster profile (jobs.ops.heartbeat)."""

    name = "watcher"

    def figures(self):
        from jobs.models import ClusterProfile
        from jobs.ops import heartbeat

        cycles = heartbeat.last_cycles()
        age = GaugeMetricFamily("ffportal_watcher_last_cycle_age_seconds",
                                "Seconds since the watcher last polled the profile (absent: never).", labels=["profile"])
        unreachable = GaugeMetricFamily("ffportal_cluster_unreachable", "1 while the watcher cannot reach the cluster.",
                                        labels=["profile"])
        now = time.time()
        for slug, down in ClusterProfile.objects.filter(is_active=True).values_list("slug", "unreachable_since"):
            if slug in cycles:
                age.add_metric([slug], max(0.0, now - cycles[slug]))
            unreachable.add_metric([slug], 1 if down else 0)
        yield age
        yield unreachable


class ClusterGpuCollector(_Safe):
    """GPUs per cluster, type and state, as the watcher last read the nodes (jobs.clusters.node_states):
    the stored reading, never SSH. A cluster never read has no series."""

    name = "cluster_gpus"

    def figures(self):
        from cluster import GPU_STATES
        from jobs.clusters.node_states import all_cluster_gpus

        gpus = GaugeMetricFamily("ffportal_gpus", "GPUs per cluster, GPU type and state (free, busy, booked, "
                                 "draining or drained, down, asleep), as the watcher last read sinfo.",
                                 labels=["cluster", "type", "state"])
        for reading in all_cluster_gpus():
            for kind, counts in reading.by_type.items():
                for state in GPU_STATES:
                    gpus.add_metric([reading.profile.slug, kind, state], counts[state])
        yield gpus


def all_collectors():
    return [DatabaseCollector(), QueueCollector(), WatcherCollector(), ClusterGpuCollector()]
