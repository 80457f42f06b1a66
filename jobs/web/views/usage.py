"""The usage page (/usage): this month's GPU-hours, the last 12 months as a chart, this month's
jobs, and a CSV export of every charged job. (The email settings are on the account page.)"""
from __future__ import annotations

import csv
import dataclasses
import io
from datetime import date

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_safe

from jobs.models import Team, UsageRecord
from jobs.quotas import quota_status
from jobs.results.files import OnePieceAtATime
from jobs.usage.accounting import MonthUsage, usage_by
from jobs.usage.team_usage import team_usage_rows

#: months shown on the user's chart
CHART_MONTHS = 12
JOBS_PER_PAGE = 50


# ---- the bar chart (inline SVG, shared with the admin report) ---------------------------------

@dataclasses.dataclass(frozen=True)
class Bar:
    period: date
    hours: float
    jobs: int
    x: float
    y: float
    width: float
    height: float
    is_current: bool

    @property
    def cx(self) -> float:
        """The bar's centre: where its value and month are written."""
        return self.x + self.width / 2


@dataclasses.dataclass(frozen=True)
class BarChart:
    """Geometry of a bar chart of GPU-hours per month, in SVG units (the template draws it)."""

    bars: list[Bar]
    width: int
    height: int
    baseline: float  # y of the x axis
    max_hours: float

    @property
    def middle(self) -> tuple[float, float]:
        return self.width / 2, self.baseline / 2

    @property
    def is_empty(self) -> bool:
        return self.max_hours <= 0


#: SVG layout: room above a bar for its value, below the axis for the month
_SLOT, _BAR, _TOP, _PLOT, _BOTTOM = 60, 38, 22, 150, 40


def bar_chart(months: list[MonthUsage], current: date | None = None) -> BarChart:
    """Bars of GPU-hours per month; the tallest fills the plot, a zero month has no bar."""
    top = max((m.gpu_hours for m in months), default=0.0)
    bars = []
    for i, m in enumerate(months):
        h = _PLOT * m.gpu_hours / top if top > 0 else 0.0
        if m.gpu_hours > 0:
            h = max(h, 2.0)  # a sliver stays visible next to a tall bar
        bars.append(Bar(period=m.period, hours=m.gpu_hours, jobs=m.jobs, x=i * _SLOT + (_SLOT - _BAR) / 2,
                        y=_TOP + _PLOT - h, height=h, is_current=m.period == current, width=_BAR))
    return BarChart(bars=bars, width=max(len(months), 1) * _SLOT, height=_TOP + _PLOT + _BOTTOM,
                    baseline=_TOP + _PLOT, max_hours=top)


# ---- pages --------------------------------------------------------------------------------------

@login_required
@require_safe
def usage(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    months = usage_by(user=request.user, months=CHART_MONTHS, now=now)
    this_month = months[-1]
    status = quota_status(request.user, now=now)
    records = (UsageRecord.objects.filter(user=request.user, period=this_month.period)
               .select_related("job", "job__template").order_by("-job__finished_at"))
    context = {
        "this_month": this_month,
        "chart": bar_chart(months, current=this_month.period),
        "months": months,
        "page": Paginator(records, JOBS_PER_PAGE).get_page(request.GET.get("page")),
        "anchor": "#jobs",
        "quota": status.gpu,  # the tightest GPU-hour limit, counted as Start counts it
        "resets_on": status.resets_on,
        # A team lead's teams, each with its usage from Slurm's accounting (this month): on the usage
        # page, with a way to the team page for members and months (jobs/web/views/teams.py)
        "led_teams": [(team, team_usage_rows(team, months=1, now=now)) for team in Team.objects.led_by(request.user)],
    }
    return render(request, "jobs/usage.html", context)


#: the CSV's columns (one row per charged job)
CSV_HEADER = ["month", "job_id", "job_name", "template", "status", "finished_at", "gpu_hours", "cpu_hours",
              "gpu_seconds", "cpu_seconds"]
#: records read per database query, and rows sent per piece of the response
CSV_CHUNK_ROWS = 500


def usage_csv_rows(records):
    """The header, then one row per usage record of `records`, read CSV_CHUNK_ROWS at a time.

    Plain values, not model instances: a record and its job (a one-to-one) would refer to each
    other, so each row would wait for the garbage collector instead of being freed at once, and each
    job's whole template snapshot would be parsed for its slug (the database picks out the slug).
    """
    yield CSV_HEADER
    rows = records.values_list("period", "job_id", "job__name", "job__template_snapshot__slug", "job__status",
                               "job__finished_at", "gpu_seconds", "cpu_seconds")
    for period, job_id, name, slug, status, finished_at, gpu_seconds, cpu_seconds in rows.iterator(
            chunk_size=CSV_CHUNK_ROWS):
        yield [period.strftime("%Y-%m"), str(job_id), name, slug or "", status,
               timezone.localtime(finished_at).isoformat() if finished_at else "",
               f"{gpu_seconds / 3600:.4f}", f"{cpu_seconds / 3600:.4f}", f"{gpu_seconds:.0f}", f"{cpu_seconds:.0f}"]


def csv_pieces(rows, rows_per_piece: int = CSV_CHUNK_ROWS):
    """The CSV text of `rows`, a piece of up to `rows_per_piece` rows at a time: few, large pieces, so
    the server's per-piece work (a thread hop and a send under ASGI) stays small next to the rows'."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for n, row in enumerate(rows, 1):
        writer.writerow(row)
        if n % rows_per_piece == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    if buffer.tell():
        yield buffer.getvalue()


class DatabaseStreamingResponse(OnePieceAtATime, StreamingHttpResponse):
    """A streaming response whose pieces are read from the database as they are sent: one piece at
    a time under ASGI (a 100,000-row CSV never sits in memory whole), on the request's own thread."""

    reads_database = True


@login_required
@require_safe
def usage_csv(request: HttpRequest) -> StreamingHttpResponse:
    """Every job charged to the user, newest first, one row each; streamed, so its memory does not
    grow with the number of jobs."""
    records = UsageRecord.objects.filter(user=request.user).order_by("-period", "-job__finished_at")
    response = DatabaseStreamingResponse(csv_pieces(usage_csv_rows(records)), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="usage-{request.user.get_username()}.csv"'
    return response
