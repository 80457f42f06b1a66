from django.contrib.auth import views as auth_views
from django.urls import include, path

from jobs.web.forms import RateLimitedAuthenticationForm
from jobs.web.views import (
    account,
    bookings,
    files,
    folders,
    live,
    new_job,
    pages,
    results,
    sources,
    uploads,
    usage,
    webhooks,
)
from jobs.web.views import delete as job_delete_views

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(
        redirect_authenticated_user=True, authentication_form=RateLimitedAuthenticationForm), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/setlang/", account.set_language, name="set_language"),  # Django's, remembered for the user
    path("i18n/", include("django.conf.urls.i18n")),
    path("", pages.job_list, name="job-list"),
    path("jobs/new", new_job.job_new, name="job-new"),
    path("uploads/", uploads.uploads, name="uploads"),
    path("uploads/<uuid:upload_id>", uploads.upload, name="upload"),
    path("uploads/<uuid:upload_id>/preview", uploads.upload_preview, name="upload-preview"),
    path("jobs/live.json", live.jobs_live, name="jobs-live"),
    path("folders", folders.folder_browse, name="folder-browse"),
    path("folders/check", folders.folder_check, name="folder-check"),
    path("usage", usage.usage, name="usage"),
    path("bookings/", bookings.booking_list, name="booking-list"),
    path("bookings/new", bookings.booking_new, name="booking-new"),
    path("bookings/calendar", bookings.booking_calendar, name="booking-calendar"),
    path("bookings/<uuid:booking_id>", bookings.booking_detail, name="booking-detail"),
    path("bookings/<uuid:booking_id>/cancel", bookings.booking_cancel, name="booking-cancel"),
    path("usage.csv", usage.usage_csv, name="usage-csv"),
    path("account", account.account, name="account"),
    path("account/email", account.email_change, name="account-email"),
    path("account/email/<str:token>", account.email_confirm, name="account-email-confirm"),
    path("account/language", account.language_settings, name="account-language"),
    path("account/notifications", account.notification_settings, name="notification-settings"),
    path("account/password", account.PasswordChange.as_view(), name="password-change"),
    path("account/webhook-secret", webhooks.webhook_secret, name="webhook-secret"),
    path("webhooks/", webhooks.webhook_list, name="webhooks"),
    path("webhooks/<uuid:delivery_id>/send-again", webhooks.webhook_send_again, name="webhook-send-again"),
    path("usage/email", account.notification_settings),  # the old address of the email settings
    path("jobs/<uuid:job_id>", pages.job_detail, name="job-detail"),
    path("jobs/<uuid:job_id>/live.json", live.job_live, name="job-live"),
    path("jobs/<uuid:job_id>/cancel", pages.job_cancel, name="job-cancel"),
    path("jobs/<uuid:job_id>/retry", pages.job_retry, name="job-retry"),
    path("jobs/<uuid:job_id>/delete", job_delete_views.job_delete, name="job-delete"),
    path("jobs/<uuid:job_id>/targets/<int:index>/replace", pages.target_replace, name="job-target-replace"),
    path("jobs/<uuid:job_id>/sources/<int:n>", sources.job_source, name="job-source"),
    path("jobs/<uuid:job_id>/targets/<int:index>", results.target_detail, name="job-target"),
    path("jobs/<uuid:job_id>/outputs/<int:index>", files.job_output, name="job-output"),
    path("jobs/<uuid:job_id>/thumbs/<int:index>", files.job_thumb, name="job-thumb"),
    path("jobs/<uuid:job_id>/inputs/<int:index>", files.job_input, name="job-input"),
    path("jobs/<uuid:job_id>/results.zip", files.job_results_zip, name="job-results-zip"),
]
