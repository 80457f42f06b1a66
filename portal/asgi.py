"""ASGI entry: HTTP through Django, WebSockets through Channels (live status, jobs/live/consumers.py).

Served by portal/server.py (uvicorn). Every HTTP request passes `RequestLimits` first: a body too
large for its caller is refused before it is read, a body that stalls is cut off (portal/limits.py).
portal/server.py also sets the umask 077 (what the portal writes is its service user's alone):
another ASGI server must be started with that umask too (e.g. systemd's UMask=0077).
"""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django_asgi_app = get_asgi_application()

from jobs.checks import refuse_insecure_start  # noqa: E402

refuse_insecure_start()  # DEBUG off with the dev key, `*` hosts or insecure cookies: do not serve

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from jobs.live.origin import SameOriginValidator  # noqa: E402
from jobs.live.routing import websocket_urlpatterns  # noqa: E402
from portal.limits import RequestLimits  # noqa: E402

http_app = django_asgi_app  # /static/ is served by WhiteNoise's middleware inside Django

application = ProtocolTypeRouter({
    "http": RequestLimits(http_app),
    # The origin checks stop other sites from opening sockets with a visitor's session cookie
    # (browsers send cookies cross-site on WebSockets, and there is no CSRF token here): the
    # Origin's host must be an allowed host, and the Origin exactly this site (jobs/live/origin.py).
    "websocket": SameOriginValidator(AllowedHostsOriginValidator(
        AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))),
})
