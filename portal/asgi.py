"""ASGI entry: HTTP through Django, WebSockets through Channels (routes added by the live-status work)."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.conf import settings  # noqa: E402

http_app = django_asgi_app
if settings.SERVE_STATIC:
    # A single-machine deployment (make up) has no separate web server for /static/.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    http_app = ASGIStaticFilesHandler(django_asgi_app)

application = ProtocolTypeRouter({"http": http_app})
