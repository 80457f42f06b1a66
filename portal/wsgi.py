import os

from django.core.wsgi import get_wsgi_application

os.umask(0o077)  # what the portal writes is its service user's alone
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()

from jobs.checks import refuse_insecure_start  # noqa: E402

refuse_insecure_start()  # DEBUG off with the dev key, `*` hosts or insecure cookies: do not serve
