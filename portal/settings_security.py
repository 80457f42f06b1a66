"""Settings that hold off attackers: failed logins (django-axes), wrong API tokens, and the
Content-Security-Policy of every page. Part of portal.settings, which imports every name here
(docs/security.md says what each promises); read them as `django.conf.settings.<NAME>`.

Imports nothing of the project but portal.env: the settings import it before the apps are loaded.
"""
from __future__ import annotations

from portal.env import envint

# Failed logins, on every login page (the portal's and the admin's): django-axes, counted in the
# database (every web process sees the same counts) per (user name, address) pair, so a guesser
# locks out only their own pair, never the owner elsewhere. After LOGIN_FAILURE_LIMIT failures the
# pair is refused, the right password too, for LOGIN_LOCKOUT_BASE seconds, twice as long at each
# further lockout of the pair within LOGIN_LOCKOUT_MAX seconds, and never longer than that.
AXES_FAILURE_LIMIT = envint("LOGIN_FAILURE_LIMIT", "5")
LOGIN_LOCKOUT_BASE = envint("LOGIN_LOCKOUT_BASE", str(5 * 60))
LOGIN_LOCKOUT_MAX = envint("LOGIN_LOCKOUT_MAX", str(24 * 3600))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_COOLOFF_TIME = "jobs.ratelimit.cool_off"
# Each attempt expires on its own pair's cool-off, not on whichever login happens to clean up.
AXES_USE_ATTEMPT_EXPIRATION = True
# Refused attempts during a lockout are not counted, so a lockout ends on time.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True  # lockouts of a pair, for the growing cool-off
AXES_DISABLE_ACCESS_LOG = True  # logins are in the portal's audit log already
AXES_USERNAME_CALLABLE = "jobs.ratelimit.username_of"
AXES_CLIENT_IP_CALLABLE = "jobs.audit.client_ip"  # REMOTE_ADDR, as the audit log reads it
AXES_LOCKOUT_CALLABLE = "jobs.ratelimit.lockout_response"
#: wrong API tokens allowed per client address within API_TOKEN_FAILURE_WINDOW seconds; further
#: wrong ones get 429 (a valid token always works: it is checked first)
API_TOKEN_FAILURES_PER_IP = envint("API_TOKEN_FAILURES_PER_IP", "20")
API_TOKEN_FAILURE_WINDOW = envint("API_TOKEN_FAILURE_WINDOW", str(15 * 60))

# Content-Security-Policy (django-csp) on every HTML page: scripts only from this site, never
# inline (the pages have none: static/js/ holds every script, data comes through data-* and
# json_script); sockets and fetches only to this site; no plugins, no framing, forms post here
# only. Inline STYLE attributes are allowed (the progress bars' widths, the admin's own): they
# cannot run code. Files served from a job (outputs, inputs) carry a stricter policy of their own.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "media-src": ["'self'", "blob:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}
