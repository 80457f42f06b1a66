"""Routes of the JSON API, mounted at /api/v1/ (a stable contract: docs/api.md)."""
from django.urls import path, re_path

from jobs.api import bookings as api_bookings
from jobs.api import retention as api_retention
from jobs.api import views as api

urlpatterns = [
    path("jobs", api.jobs, name="api-jobs"),
    path("jobs/<uuid:job_id>", api_retention.job_or_delete, name="api-job"),  # GET: api.job; DELETE: files
    path("jobs/<uuid:job_id>/cancel", api.job_cancel, name="api-job-cancel"),
    path("jobs/<uuid:job_id>/retry", api.job_retry, name="api-job-retry"),
    path("jobs/<uuid:job_id>/results.zip", api.job_results, name="api-job-results"),
    path("jobs/<uuid:job_id>/tasks", api.job_tasks, name="api-job-tasks"),
    path("jobs/<uuid:job_id>/outputs", api.job_outputs, name="api-job-outputs"),
    path("jobs/<uuid:job_id>/outputs/<int:index>", api.job_output, name="api-job-output"),
    path("templates", api.templates, name="api-templates"),
    path("folders", api.folders, name="api-folders"),
    path("bookings", api_bookings.bookings_view, name="api-bookings"),
    path("bookings/<uuid:booking_id>", api_bookings.booking_view, name="api-booking"),
    # Last: unknown paths and malformed job ids answer JSON 404, not the site's HTML page.
    re_path(r"^.*$", api.not_found),
]
