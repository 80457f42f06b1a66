"""Signal receivers of the jobs app: logins, logouts, failed logins and lockouts go to the audit log;
a logout also closes the live sockets opened with that login (jobs.live.protocol).

Connected in `JobsConfig.ready()` (not at import), with dispatch_uids so a second `ready()`
(tests, autoreload) never records an action twice.
"""
from __future__ import annotations

from axes.signals import user_locked_out
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed

from jobs import audit, ratelimit
from jobs.live.protocol import end_session_sockets
from jobs.web.language import on_login as apply_chosen_language


def on_login(sender, request, user, **kwargs) -> None:
    audit.record(user, "auth.login", target=user, request=request)


def on_logout(sender, request, user, **kwargs) -> None:
    if user is not None:  # logging out without a session sends user=None
        audit.record(user, "auth.logout", target=user, request=request)
    session = getattr(request, "session", None)
    if session is not None:  # before Django flushes it: its key names the sockets' group
        end_session_sockets(session.session_key)


def on_login_failed(sender, credentials, request=None, **kwargs) -> None:
    # `credentials` has the password replaced by Django's cleanse (********); only the name is kept.
    username = str((credentials or {}).get("username", ""))[:150]
    audit.record(None, "auth.login_failed", details={"username": username}, request=request)


def on_locked_out(sender, request=None, username=None, ip_address=None, **kwargs) -> None:
    # django-axes: a (user name, address) pair reached its failure limit, or tried again while locked.
    ratelimit.locked_out(request, username, ip_address)


def connect() -> None:
    user_logged_in.connect(on_login, dispatch_uid="jobs.audit.login")
    user_logged_in.connect(apply_chosen_language, dispatch_uid="jobs.language.login")
    user_logged_out.connect(on_logout, dispatch_uid="jobs.audit.logout")
    user_login_failed.connect(on_login_failed, dispatch_uid="jobs.audit.login_failed")
    user_locked_out.connect(on_locked_out, dispatch_uid="jobs.audit.locked_out")
