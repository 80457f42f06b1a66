"""WebSocket routes (mounted by portal.asgi under the origin validator and the session auth)."""
from django.urls import path

from jobs.live import consumers

websocket_urlpatterns = [
    path("ws/jobs/", consumers.JobListConsumer.as_asgi()),
    path("ws/jobs/<uuid:job_id>/", consumers.JobConsumer.as_asgi()),
]
