"""New job: the form, and Start."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from jobs.errors import StartError
from jobs.quotas import quota_status
from jobs.start import start_job
from jobs.web.forms import NewJobForm


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def job_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = NewJobForm(request.POST, request.FILES, user=request.user)
        if form.is_valid():
            data = form.cleaned_data
            try:
                job = start_job(user=request.user, template=data["template"], sources=data["source"],
                                target_folder=data["target_folder"].strip(), target_files=data["targets"],
                                consent=data["consent"], name=data["name"], request=request)
            except StartError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
            else:
                messages.success(request, _("Job started. This page follows its progress."), extra_tags="job-started")
                return redirect("job-detail", job_id=job.id)
    else:
        form = NewJobForm(user=request.user, initial={"target_folder": request.GET.get("target_folder", "")})
        # The admin's first template (by their order) is the default choice.
        form.initial["template"] = form.fields["template"].queryset.values_list("pk", flat=True).first()
    # What the user has left, shown before Start (the Start itself checks again, under a lock).
    return render(request, "jobs/job_new.html", {"form": form, "files_dropped": bool(request.FILES),
                                                 "quota": quota_status(request.user)})
