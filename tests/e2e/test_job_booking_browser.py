"""New job in a real browser: "Run inside my GPU booking" offers only the bookings on the cluster of
the template chosen (static/js/booking_choice.js); picking a template on another cluster swaps them."""
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from jobs.models import Booking, BookingState, ClusterProfile, GpuType, Template

from .test_browser_access import logged_in, open_browser
from .test_browser_live import _sync_playwright, web_server  # noqa: F401 - fixture


def booking(user, profile, name) -> Booking:
    gpu, _ = GpuType.objects.get_or_create(cluster=profile, gres_type="h200",
                                           defaults={"memory_gb": 141, "compute_capability": "9.0"})
    now = timezone.now()
    return Booking.objects.create(user=user, task_name=name, gpu_count=1, duration_minutes=60, cluster=profile,
                                  gpu_type=gpu, starts_at=now, ends_at=now + timedelta(hours=1),
                                  state=BookingState.CONFIRMED, reservation_name=f"ffp-{name}", reservation_made=True)


def test_the_booking_choice_follows_the_templates_cluster(local, web_server, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    owner = User.objects.get(username="demo")
    other = ClusterProfile.objects.exclude(pk=local.pk).first() or ClusterProfile.objects.create(
        name="Second", slug="second-browser", host="127.0.0.1", port=2299, username="ffportal",
        private_key=local.private_key, known_hosts=local.known_hosts, work_root="/srv/ffportal/work2",
        target_roots=list(local.target_roots), worker_python=local.worker_python)
    second = Template.objects.get(slug="gpu-batch")
    second.pk, second.slug, second.name, second.cluster, second.order = None, "gpu-there", "GPU there", other, 999
    second.save()
    here, there = booking(owner, local, "here"), booking(owner, other, "there")
    session = Client()
    session.force_login(owner)
    cookie = session.cookies[settings.SESSION_COOKIE_NAME].value
    with _sync_playwright()() as p:
        browser = open_browser(p)
        try:
            page = logged_in(browser, web_server, cookie, 1280).new_page()
            page.goto("/jobs/new")
            page.locator(".template-card", has_text="GPU batch").first.click()
            options = page.locator("#id_booking option")

            def usable() -> set[str]:
                return {options.nth(i).get_attribute("value") for i in range(options.count())
                        if not options.nth(i).is_disabled()}
            assert usable() == {"", str(here.id)}
            page.select_option("#id_booking", str(here.id))
            page.locator(".template-card", has_text="GPU there").click()
            assert usable() == {"", str(there.id)}
            assert page.eval_on_selector("#id_booking", "s => s.value") == ""  # the other cluster's choice is dropped
        finally:
            browser.close()
