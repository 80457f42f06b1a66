"""Admin for usage and email: usage records (read-only), the usage report (per user, group and
month, with a chart and CSV), users' email preferences, and the log of emails sent.

Registered by the import in jobs/admin/__init__.py. The report lives under the usage records'
admin (`admin:jobs_usagerecord_report`, linked from its list): the admin site's own login and
staff check guard it, and the staff member also needs the "view usage record" permission. Its
"By team" table is Slurm's own accounting (jobs.usage.team_usage); reading it again needs "change
team usage".
"""
from __future__ import annotations

import csv
from collections import defaultdict

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import formats, timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from jobs.admin.base import AuditedAdmin
from jobs.background import enqueue
from jobs.models import EmailNotice, NotificationPreference, UsageRecord
from jobs.usage.accounting import last_months, usage_by, usage_rows
from jobs.usage.team_usage import report_rows
from jobs.web.views.usage import bar_chart

#: report periods an admin can pick, in months; the first is the default
REPORT_MONTHS = (12, 3, 6, 24)
#: "Read again from the clusters" asks the clusters over SSH: an explicit permission, not the staff flag
READ_AGAIN_PERMISSION = "jobs.change_teamusage"


@admin.register(UsageRecord)
class UsageRecordAdmin(AuditedAdmin):  # deleting a record is a refund: audited
    """One row per ended job, written by the watcher. Read-only; deleting one refunds its usage."""

    list_display = ("job", "user", "month", "gpu_hours_display", "cpu_hours_display", "charged_at")
    list_filter = ("user__groups",)  # months: the date hierarchy above the list
    list_select_related = ("job", "user")
    search_fields = ("user__username", "user__email", "job__name")
    date_hierarchy = "period"
    fields = ("job", "user", "period", "gpu_seconds", "cpu_seconds", "charged_at")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description=gettext_lazy("month"), ordering="period")
    def month(self, obj: UsageRecord) -> str:
        return obj.period.strftime("%Y-%m")

    @admin.display(description=gettext_lazy("GPU-hours"), ordering="gpu_seconds")
    def gpu_hours_display(self, obj: UsageRecord) -> str:
        return f"{obj.gpu_hours:.2f}"

    @admin.display(description=gettext_lazy("CPU-hours"), ordering="cpu_seconds")
    def cpu_hours_display(self, obj: UsageRecord) -> str:
        return f"{obj.cpu_seconds / 3600:.2f}"

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("report/", view(self.report_view), name="jobs_usagerecord_report"),
            path("report.csv", view(self.report_csv_view), name="jobs_usagerecord_report_csv"),
            path("report/read-again/", view(require_POST(self.read_again_view)), name="jobs_usagerecord_read_again"),
            *super().get_urls(),
        ]

    # ---- the report -------------------------------------------------------------------------

    def _report_options(self, request: HttpRequest) -> tuple[int, Group | None]:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            months = int(request.GET.get("months", REPORT_MONTHS[0]))
        except ValueError:
            months = REPORT_MONTHS[0]
        months = months if months in REPORT_MONTHS else REPORT_MONTHS[0]
        group_id = request.GET.get("group", "")
        group = Group.objects.filter(pk=group_id).first() if group_id.isdigit() else None
        return months, group

    def report_view(self, request: HttpRequest) -> TemplateResponse:
        months, group = self._report_options(request)
        now = timezone.now()
        periods = last_months(months, now)
        totals = usage_by(group=group, months=months, now=now)
        by_user, by_group = report_tables(usage_rows(months, now, group=group), periods, only_group=group)
        by_team = report_rows(periods, group=group)
        for row in (*by_user, *by_group, *by_team):
            row["total_text"] = hours_text(row["total"])
            # None: never read from that cluster for that month, which is not the same as none used
            row["cells"] = [(h, "–" if h is None else hours_text(h)) for h in row["hours"]]
        context = {
            **self.admin_site.each_context(request),
            "title": _("Usage report"),
            "opts": self.model._meta,
            "periods": periods,
            "totals": totals,
            "total_hours": hours_text(sum(m.gpu_hours for m in totals)),
            "chart": bar_chart(totals, current=periods[-1]),
            "by_user": by_user,
            "by_group": by_group,
            "by_team": by_team,
            "can_read_again": request.user.has_perm(READ_AGAIN_PERMISSION),
            "months": months,
            "now": now,  # "read 3 hours ago" counts from the portal's now
            "month_choices": sorted(REPORT_MONTHS),
            "group": group,
            "groups": Group.objects.order_by("name"),
            "query": request.GET.urlencode(),
        }
        return TemplateResponse(request, "admin/jobs/usagerecord/report.html", context)

    def read_again_view(self, request: HttpRequest) -> HttpResponseRedirect:
        """"Read again from the clusters": queued, since a cluster that does not answer may take a
        minute to time out; the report shows the new figures once read."""
        if not self.has_view_permission(request) or not request.user.has_perm(READ_AGAIN_PERMISSION):
            raise PermissionDenied
        try:
            enqueue.enqueue_team_usage_read()
            messages.success(request, _("Reading usage by team again from the clusters. Reload this page in a "
                                        "minute to see the new figures."))
        except Exception:  # noqa: BLE001 - Redis down: say so, the report itself still works
            messages.error(request, _("The portal could not start reading the clusters now. Try again in a few "
                                      "minutes; the figures read every 10 minutes stay."))
        return HttpResponseRedirect(reverse("admin:jobs_usagerecord_report") + "#by-team")

    def report_csv_view(self, request: HttpRequest) -> HttpResponse:
        """One row per user and month: month, user, email, groups, jobs, GPU-hours, CPU-hours."""
        months, group = self._report_options(request)
        rows = usage_rows(months, timezone.now(), group=group)
        users = _users_with_groups({r["user_id"] for r in rows})
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="usage-report-{months}-months.csv"'
        writer = csv.writer(response)
        writer.writerow(["month", "user", "email", "groups", "jobs", "gpu_hours", "cpu_hours"])
        for r in rows:
            user = users.get(r["user_id"])
            writer.writerow([r["period"].strftime("%Y-%m"), user.get_username() if user else r["user_id"],
                             user.email if user else "", ";".join(g.name for g in user.groups.all()) if user else "",
                             r["jobs"], f"{r['gpu_seconds'] / 3600:.4f}", f"{r['cpu_seconds'] / 3600:.4f}"])
        return response


def hours_text(hours: float) -> str:
    """GPU-hours in the report: two decimals, so that small jobs still show and a column adds up to
    its total (0.04 + 0.04 = 0.08, where one decimal said 0.0 + 0.0 = 0.1); "<0.01" for a little
    use that two decimals would round to nothing; "0" for none."""
    if not hours:
        return "0"
    if hours < 0.005:
        return "<0.01"
    return formats.number_format(hours, 2, force_grouping=True)


def _users_with_groups(ids) -> dict:
    return {u.pk: u for u in get_user_model().objects.filter(pk__in=ids).prefetch_related("groups")}


def report_tables(rows: list[dict], periods: list, only_group: Group | None = None) -> tuple[list[dict], list[dict]]:
    """Pivot `usage_rows` into per-user and per-group rows of GPU-hours per period, biggest first.

    A user's usage counts for every group they are in now (a user in two groups shows in both);
    users in no group are one "no group" row. With `only_group`, only that group's row is kept.
    """
    column = {p: i for i, p in enumerate(periods)}
    users = _users_with_groups({r["user_id"] for r in rows})
    per_user: dict[int, list[float]] = defaultdict(lambda: [0.0] * len(periods))
    jobs: dict[int, int] = defaultdict(int)
    for r in rows:
        per_user[r["user_id"]][column[r["period"]]] += r["gpu_seconds"] / 3600
        jobs[r["user_id"]] += r["jobs"]
    by_user, per_group = [], defaultdict(lambda: {"hours": [0.0] * len(periods), "jobs": 0, "users": 0})
    for uid, hours in per_user.items():
        user = users.get(uid)
        groups = list(user.groups.all()) if user else []
        by_user.append({"user": user, "name": user.get_username() if user else str(uid),
                        "groups": ", ".join(g.name for g in groups), "hours": hours, "total": sum(hours),
                        "jobs": jobs[uid]})
        names = [g.name for g in groups if only_group is None or g.pk == only_group.pk]
        if not names and only_group is None:
            names = [_("(no group)")]
        for name in names:
            entry = per_group[name]
            entry["hours"] = [a + b for a, b in zip(entry["hours"], hours)]
            entry["jobs"] += jobs[uid]
            entry["users"] += 1
    by_group = [{"name": name, **v, "total": sum(v["hours"])} for name, v in per_group.items()]
    by_user.sort(key=lambda row: (-row["total"], row["name"]))
    by_group.sort(key=lambda row: (-row["total"], row["name"]))
    return by_user, by_group


@admin.register(NotificationPreference)
class NotificationPreferenceAdmin(admin.ModelAdmin):
    list_display = ("user", "job_emails", "quota_emails")
    list_filter = ("job_emails", "quota_emails")
    search_fields = ("user__username", "user__email")
    raw_id_fields = ("user",)


@admin.register(EmailNotice)
class EmailNoticeAdmin(admin.ModelAdmin):
    """What the portal emailed, to whom, and whether the SMTP server took it. Read-only."""

    list_display = ("created_at", "kind", "user", "to", "subject", "status")
    list_filter = ("status", "kind")
    list_select_related = ("user",)
    search_fields = ("to", "subject", "user__username", "key")
    date_hierarchy = "created_at"
    fields = ("key", "kind", "user", "job", "period", "to", "subject", "status", "error", "created_at", "sent_at")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
