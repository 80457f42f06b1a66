from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = _("Face fusion jobs")

    def ready(self) -> None:
        from jobs import checks, signals  # noqa: F401 - importing checks registers them

        signals.connect()
