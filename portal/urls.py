from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("jobs.urls_api")),
    path("", include("jobs.urls_pages")),
]
