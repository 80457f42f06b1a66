"""The admin's front page in sections a non-technical admin can find their way in.

Django lists every table of every installed app alphabetically by app ("Axes", "Django-RQ", "Jobs"
with 18 tables): an admin looking for "who may use which template" had to know the app's name.
Here the tables are grouped by what an admin comes to do (people and limits, templates and clusters,
bookings...), in the order they are needed; the login-lockout and queue tables of the libraries
the portal uses go last, under "For site engineers". A table no section names goes there too, so a
new one is never hidden.

Each app's own page (/admin/jobs/) keeps Django's list: only the front page and the side bar change.
Tables are named by "app_label.model_name" so this module imports no model (it is loaded while
Django sets up its apps, through INSTALLED_APPS).
"""
from __future__ import annotations

from django.contrib.admin import AdminSite
from django.contrib.admin.apps import AdminConfig
from django.utils.translation import gettext_lazy as _
from django.utils.translation import gettext_noop

#: the names the libraries' tables go by in the admin, which their packages translate into no
#: Chinese: marked here so that the portal's catalogue carries them (Django looks a word up in every
#: catalogue, the project's first)
LIBRARY_WORDS = (gettext_noop("access attempts"), gettext_noop("access logs"), gettext_noop("access failures"),
                 gettext_noop("access attempt"), gettext_noop("access log"), gettext_noop("access failure"))

#: (key, heading, tables in the order shown); the last section also takes every table not named
SECTIONS = (
    ("people", _("People and limits"),
     ("auth.user", "auth.group", "jobs.team", "jobs.quota", "jobs.qoslevel", "jobs.grouppriority")),
    ("setup", _("Templates and clusters"), ("jobs.template", "jobs.clusterprofile", "jobs.modelset")),
    ("work", _("Jobs and files"), ("jobs.job", "jobs.upload")),
    ("bookings", _("GPU bookings"), ("jobs.booking", "jobs.gputype", "jobs.bookingpolicy")),
    ("rules", _("Rules for files and content"), ("jobs.uploadpolicy", "jobs.retentionpolicy", "jobs.safetypolicy")),
    ("messages", _("Emails and webhooks"), ("jobs.notificationpreference", "jobs.emailnotice", "jobs.webhookdelivery")),
    ("records", _("Records"), ("jobs.auditentry", "jobs.usagerecord")),
    ("engineers", _("For site engineers"), ("jobs.apitoken",)),
)


def group_tables(app_list: list[dict]) -> list[dict]:
    """Django's app list (each app with its "models") -> the sections above, each shaped like an app
    (so Django's own index and side bar templates show them). Sections the user may see nothing in
    are left out."""
    tables = {f"{app['app_label']}.{m['object_name'].lower()}": m for app in app_list for m in app["models"]}
    named = {key for _section, _heading, keys in SECTIONS for key in keys}
    sections = []
    for section, heading, keys in SECTIONS:
        models = [tables[key] for key in keys if key in tables]
        if section == SECTIONS[-1][0]:  # the rest, in Django's order
            models += [m for key, m in tables.items() if key not in named]
        if models:
            sections.append({"name": heading, "app_label": section, "app_url": f"#{section}",
                             "has_module_perms": True, "models": models})
    return sections


class PortalAdminSite(AdminSite):
    site_header = _("FaceFusion Portal administration")
    site_title = _("FaceFusion Portal admin")
    index_title = _("What would you like to look after?")

    def get_app_list(self, request, app_label=None):
        app_list = super().get_app_list(request, app_label)
        return app_list if app_label else group_tables(app_list)


class PortalAdminConfig(AdminConfig):
    """django.contrib.admin with the portal's front page (INSTALLED_APPS names this instead)."""

    default_site = "portal.admin_site.PortalAdminSite"
