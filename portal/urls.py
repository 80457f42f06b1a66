from django.contrib import admin
from django.urls import include, path

from jobs.ops import views as ops

urlpatterns = [
    # For nginx and monitors (jobs.ops): alive, ready, Prometheus figures (token or allowed networks).
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("jobs.api.urls")),
    path("", include("jobs.web.urls")),
]
