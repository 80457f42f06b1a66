"""`/healthz`, `/readyz`, `/metrics`: thin views over jobs.ops.health and the collectors.

/readyz's details (clusters, the watcher's age) are for those who may read /metrics; anyone else
gets ready or not (the status code, one word).

Who may read /metrics (`metrics_refusal`): a request with `Authorization: Bearer <METRICS_TOKEN>`,
or one whose peer address is in METRICS_ALLOWED_NETWORKS and that did not come through a proxy.
A proxied request (nginx adds X-Forwarded-For / X-Real-IP) has nginx's own address as its peer,
127.0.0.1 say, whoever sent it: letting that in by address would open /metrics to the internet.
"""
from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess

from jobs.ops import metrics
from jobs.ops.collectors import all_collectors
from jobs.ops.health import readiness

#: headers a reverse proxy adds: their presence means the peer address is the proxy's
PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP", "HTTP_FORWARDED")


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """The process serves requests. Reads nothing (no database): a monitor restarts what fails it."""
    return HttpResponse("ok\n", content_type="text/plain; charset=utf-8")


@never_cache
@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    """200 when ready, 503 when not. Anyone gets only that, and one word ("ready" / "unready"):
    the details name the cluster profiles and how long ago the watcher last ran, which is for
    whoever may read /metrics (the same token or networks, `metrics_refusal`), as JSON."""
    state = readiness()
    status = 200 if state.ready else 503
    if metrics_refusal(request) is None:
        response = JsonResponse(state.as_json(), status=status)
    else:
        response = HttpResponse("ready\n" if state.ready else "unready\n", status=status,
                                content_type="text/plain; charset=utf-8")
    # A 503 here is an answer, not a server error: Django would log one ERROR (and mail admins)
    # per probe, every few seconds. What failed is logged once per check, as a warning (jobs.ops.health).
    response._has_been_logged = True
    return response


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    refusal = metrics_refusal(request)
    if refusal is not None:
        return refusal
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)


def scrape_registry() -> CollectorRegistry:
    """A registry for one scrape: every process's recorded metrics (the multi-process directory, or
    this process's own), plus the figures read now from the database and Redis."""
    registry = CollectorRegistry(auto_describe=False)
    path = metrics.multiproc_dir()
    if path:
        metrics.forget_dead_processes(path)
        multiprocess.MultiProcessCollector(registry, path=path)
    else:
        registry.register(_ThisProcess())
    for collector in all_collectors():
        registry.register(collector)
    return registry


class _ThisProcess:
    """The default registry's metrics (one process: no multi-process directory)."""

    def collect(self):
        return REGISTRY.collect()


def metrics_refusal(request: HttpRequest) -> HttpResponse | None:
    """None when the request may read /metrics; else the answer: 401 without credentials (when a token
    would do), 403 with a wrong token, from outside the networks when no token is set, and when the
    site configured neither (metrics off)."""
    token = settings.METRICS_TOKEN
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header:
        scheme, _sep, given = header.partition(" ")
        if token and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            return None
        return _refuse(403, _("Wrong metrics token."))
    if _from_allowed_network(request):
        return None
    if not token and not settings.METRICS_ALLOWED_NETWORKS:
        return _refuse(403, _("Metrics are turned off: set METRICS_TOKEN or METRICS_ALLOWED_NETWORKS."))
    if not token:  # no token would do: only the networks may read
        return _refuse(403, _("Metrics are not open to this address."))
    response = _refuse(401, _("Metrics need a token (Authorization: Bearer ...)."))
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def _from_allowed_network(request: HttpRequest) -> bool:
    if any(request.META.get(h) for h in PROXY_HEADERS):
        return False
    try:
        peer = ipaddress.ip_address((request.META.get("REMOTE_ADDR") or "").strip())
    except ValueError:
        return False
    # Strings in settings (checked at start-up): parsed here, a handful per scrape.
    return any(peer in ipaddress.ip_network(net, strict=False) for net in settings.METRICS_ALLOWED_NETWORKS)


def _refuse(status: int, words: str) -> HttpResponse:
    return HttpResponse(words + "\n", status=status, content_type="text/plain; charset=utf-8")
