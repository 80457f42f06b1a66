"""Jobs (read-mostly) and API tokens (listed and revoked) in the admin.

A job's metadata needs the admin's `view_job`; its face photos and results need `jobs.see_faces`
as well, and each one opened is audited (jobs/admin/faces.py, jobs.access).
"""
from __future__ import annotations

import uuid

from django.contrib import admin
from django.urls import path
from django.utils.translation import gettext_lazy as _

from jobs.access import may_see_faces
from jobs.admin.faces import URL_NAME, face_file, job_links, target_links
from jobs.models import ApiToken, Job, Target, Task


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class TaskInline(_ReadOnlyInline):
    model = Task
    fields = ("index", "state", "node", "elapsed_seconds", "exit_code", "reason", "gpus")


class TargetInline(_ReadOnlyInline):
    model = Target
    classes = ("collapse",)  # a job may have thousands; folded until asked for
    fields = ("index", "name", "status", "task_index", "faces_found", "faces_swapped", "seconds", "message",
              "output_file")
    readonly_fields = ("files",)

    def get_fields(self, request, obj=None):
        # The input and output links only for those who may see other people's faces.
        return [*self.fields, "files"] if may_see_faces(request.user) else list(self.fields)

    @admin.display(description=_("files"))
    def files(self, target: Target) -> str:
        return target_links(target)


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    """Read-mostly: the watcher and the RQ tasks own a job's state; admins look and may delete."""

    list_display = ("__str__", "status", "owner", "template", "slurm_job_id", "done", "failed", "total", "created_at")
    list_filter = ("status", "cluster", "template")
    list_select_related = ("owner", "template")
    search_fields = ("name", "owner__username", "owner__email", "slurm_job_id")
    date_hierarchy = "created_at"
    inlines = (TaskInline, TargetInline)
    readonly_fields = ("id", "face_files")

    class Media:
        css = {"all": ("css/admin.css",)}

    def get_fields(self, request, obj=None):
        # The id first, then the rest in model order; the reference face only as a link of
        # face_files, for those who may see other people's faces (a file field would link to it).
        fields = [f.name for f in Job._meta.fields if f.name != "reference_face"]
        return [*fields, "face_files"] if may_see_faces(request.user) else fields

    @admin.display(description=_("face photos and results"))
    def face_files(self, job: Job) -> str:
        return job_links(job)

    def get_urls(self):
        view = self.admin_site.admin_view(self.face_file_view)
        return [path("<uuid:job_id>/faces/<str:kind>/<int:n>/", view, name=URL_NAME), *super().get_urls()]

    def face_file_view(self, request, job_id, kind: str, n: int):
        return face_file(request, job_id, kind, n, may_view_job=self.has_view_permission(request))

    def has_add_permission(self, request) -> bool:
        return False  # jobs start from the New job page or the API, which check quota and uploads

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # viewing only; deleting stays possible

    def get_search_results(self, request, queryset, search_term):
        queryset, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        try:
            job_id = uuid.UUID(search_term.strip())
        except ValueError:
            return queryset, may_have_duplicates
        # An id is searched as an id: UUIDs are not stored as text everywhere (SQLite drops the dashes).
        return queryset | self.model.objects.filter(pk=job_id), may_have_duplicates


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are made by `manage.py create_api_token <user>` (the key is shown once, there);
    here they are listed and revoked. The key itself is never stored, so never shown."""

    list_display = ("prefix", "user", "created_at", "last_used_at")
    list_select_related = ("user",)
    search_fields = ("prefix", "user__username")
    fields = ("prefix", "user", "created_at", "last_used_at")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
