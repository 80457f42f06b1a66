"""Who may reach whose work: every endpoint of the pages, the JSON API and the live sockets, as five
callers (jobs/access.py, docs/security.md "Who sees whose work"). The admin, with the same callers
and the same work: test_access_matrix_admin.py.

The rows are keyed by the URL patterns themselves (portal.urls and jobs.live.routing, read at test
time): a new endpoint without a row here fails `test_every_endpoint_has_a_row`.

Callers: the owner; a stranger; view-only staff (is_staff with every `view_*` permission); staff
with `jobs.see_faces` too; a superuser; and with teams: another member of the owner's team, the
lead of the owner's team, a member and a lead of another team. Outside the admin only the owner
reaches the work, and the lead of the owner's team reaches the owner's JOB where a row says so
(`lead`: open it, its files, cancel, retry, run again; never delete or replace, never bookings,
uploads or webhook calls): for everyone else an object's address answers what a missing object's
answers (404), no response carries the owner's names or ids, and no action changes anything. In the admin, face files open
only with `jobs.see_faces` (superusers hold it), and each opening is audited.
"""
from __future__ import annotations

import dataclasses
import functools
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group, Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLResolver, get_resolver
from django.utils import timezone

from jobs.live.consumers import CLOSE_NOT_FOUND
from jobs.live.routing import websocket_urlpatterns
from jobs.models import (
    AuditEntry,
    Booking,
    BookingState,
    DeliveryState,
    GpuType,
    Job,
    JobStatus,
    Quota,
    Source,
    Target,
    TargetStatus,
    Team,
    Upload,
    UploadKind,
    UploadStatus,
    WebhookDelivery,
)

from .test_consumers import connect, refusal_code  # sockets through the real ASGI stack, with a real session

CALLERS = ["owner", "stranger", "viewer", "face_viewer", "superuser", "member", "lead", "other_member",
           "other_lead"]

JOB_NAME = "Alice secret wedding"
BOOKING_NAME = "alice-secret-booking"
HOOK_URL = "https://alice.example/secret-hook"
UPLOAD_NAME = "alice-secret-upload.jpg"


# ---- the callers and the owner's work ----------------------------------------------------------

def staff_with(username: str, *extra: str) -> User:
    """is_staff with every view_* permission (jobs.see_faces is not one), and `extra` codenames."""
    user = User.objects.create_user(username, f"{username}@example.org", f"{username}-pass-123", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__startswith="view_")
                              | Permission.objects.filter(content_type__app_label="jobs", codename__in=extra))
    return user


def person(username: str, group: Group) -> User:
    user = User.objects.create_user(username, f"{username}@example.org", f"{username}-pass-123")
    user.groups.add(group)
    return user


@pytest.fixture
def callers(owner, colleague, stranger, staff, team) -> dict[str, User]:
    """The owner (alice) is a member of team vfx (the `team` group); the job below runs for it."""
    vfx = Team.objects.create(group=team, slurm_account="vfx")
    other = Team.objects.create(group=Group.objects.create(name="post"), slurm_account="post")
    lead, other_lead = person("lena", team), person("omar", other.group)
    vfx.leads.add(lead)
    other.leads.add(other_lead)
    return {"owner": owner, "stranger": stranger, "viewer": staff_with("viewer"),
            "face_viewer": staff_with("face-viewer", "see_faces"), "superuser": staff, "member": colleague,
            "lead": lead, "other_member": person("olga", other.group), "other_lead": other_lead}


@dataclasses.dataclass
class World:
    job: Job
    booking: Booking
    delivery: WebhookDelivery
    upload: Upload

    @property
    def ids(self) -> dict[str, str]:
        return {"job": str(self.job.id), "booking": str(self.booking.id), "delivery": str(self.delivery.id),
                "upload": str(self.upload.id)}

    @property
    def extra(self) -> dict[str, str]:
        """Other values the rows' URLs and forms name: not the owner's work (no marker)."""
        return {"owner_pk": str(self.job.owner_id), "template": str(self.job.template_id)}

    @property
    def markers(self) -> list[str]:
        """What no response to anyone but the owner may contain."""
        return [JOB_NAME, BOOKING_NAME, HOOK_URL, UPLOAD_NAME, *self.ids.values()]

    def state(self) -> dict:
        """Everything an action by someone else could change."""
        job = Job.objects.get(pk=self.job.pk)
        return {
            "job": (job.status, job.cancel_requested, job.attempt, job.files_deleted_at, job.reference_face.name),
            "targets": list(job.targets.values_list("index", "status", "upload", "output_file")),
            "sources": list(job.sources.values_list("file", flat=True)),
            "files": sorted(str(p) for p in job.media_dir.rglob("*")),
            "booking": Booking.objects.get(pk=self.booking.pk).state,
            "delivery": WebhookDelivery.objects.filter(pk=self.delivery.pk).values_list("state", "attempts").get(),
            "upload": (Upload.objects.filter(pk=self.upload.pk).exists(), self.upload.path.exists()),
            "uploads": Upload.objects.count(),
            "audit": AuditEntry.objects.filter(target_id__in=list(self.ids.values())).count(),
            "quotas": list(Quota.objects.values_list("user", "gpu_hours_per_month")),
            "team_templates": list(Team.templates.through.objects.values_list("team", "template")),
        }


@pytest.fixture
def world(owner, template, jpeg_bytes, callers) -> World:
    """The owner's work: a finished job of team vfx (face photo, reference face, a done target with
    its input, output and thumbnail, a failed one), a booking waiting for approval, a failed webhook
    call, an upload."""
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, name=JOB_NAME, status=JobStatus.PARTIALLY_FAILED,
                             total=2, done=1, failed=1, finished_at=timezone.now(),
                             team=Team.objects.get(slurm_account="vfx"), slurm_account="vfx")
    job.reference_face = SimpleUploadedFile("reference.jpg", jpeg_bytes)
    job.save(update_fields=["reference_face"])
    Source.objects.create(job=job, file=SimpleUploadedFile("face.jpg", jpeg_bytes), original_name="face.jpg")
    outputs, thumbs = job.media_dir / "outputs", job.media_dir / "thumbs"
    outputs.mkdir(parents=True)
    thumbs.mkdir(parents=True)
    (outputs / "bride.jpg").write_bytes(jpeg_bytes)
    (thumbs / "bride.jpg").write_bytes(jpeg_bytes)
    Target.objects.create(job=job, index=0, name="bride.jpg", output_name="bride.jpg", status=TargetStatus.DONE,
                          upload=SimpleUploadedFile("bride.jpg", jpeg_bytes), output_file=str(outputs / "bride.jpg"),
                          thumbnail_file=str(thumbs / "bride.jpg"))
    Target.objects.create(job=job, index=1, name="groom.jpg", output_name="groom.jpg", status=TargetStatus.FAILED,
                          message="no face found")
    gpu = GpuType.objects.create(cluster=template.cluster, gres_type="h200", memory_gb=141, compute_capability="9.0",
                                 inventory=2, nodes=[{"name": "node1", "gpus": 2, "cpus": 2}])
    start = timezone.now() + timedelta(hours=1)
    booking = Booking.objects.create(user=owner, task_name=BOOKING_NAME, gpu_count=1, duration_minutes=120,
                                     gpu_type=gpu, cluster=template.cluster, starts_at=start,
                                     ends_at=start + timedelta(hours=2), state=BookingState.REQUESTED)
    delivery = WebhookDelivery.objects.create(user=owner, url=HOOK_URL, event="job.finished", job=job,
                                              state=DeliveryState.FAILED, attempts=1, last_error="refused")
    upload = Upload.objects.create(owner=owner, kind=UploadKind.SOURCE, name=UPLOAD_NAME, size=len(jpeg_bytes),
                                   offset=len(jpeg_bytes), status=UploadStatus.READY,
                                   expires_at=timezone.now() + timedelta(days=1))
    upload.path.parent.mkdir(parents=True, exist_ok=True)
    upload.path.write_bytes(jpeg_bytes)
    upload.preview_path.write_bytes(jpeg_bytes)
    return World(job, booking, delivery, upload)


class RecordingQueue:
    def __init__(self):
        self.enqueued = []

    def enqueue(self, func, *args, **options):
        self.enqueued.append((func, args))


@pytest.fixture(autouse=True)
def _no_outside_world(monkeypatch, fake_ssh):
    """Nothing leaves the process: RQ records, the cluster never answers, no booking notice is sent."""
    monkeypatch.setattr("jobs.background.enqueue.queue", lambda: RecordingQueue())
    monkeypatch.setattr("jobs.bookings.lifecycle.notify", lambda booking, event: None)
    monkeypatch.setattr("jobs.bookings.offpeak.share_by_hour", lambda profile, now=None: None)
    fake_ssh.unreachable("test: no cluster")


# ---- the rows: one per URL pattern -------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Call:
    """One request. `url` is formatted with the world's ids ({job}, {booking}, {delivery}, {upload}).

    kind "object": names the owner's object; the owner gets `owner`, anyone else exactly what the
    same request for a missing object gets, and that is `missing` (404).
    kind "list": everyone gets `owner`; only the owner's answer holds the owner's work.
    kind "none": not about anyone's work (the caller's own account, the cluster's folders ...): the
    answer must hold none of the owner's work, whatever its status.
    kind "team": the owner's team's page or list for its lead: the lead gets `lead`, everyone else
    (the owner too) `missing` and none of the work.
    `lead`: what the lead of the owner's team gets, the owner's work shown and acted on as the
    owner's would be; None: the lead is one of everyone else."""

    kind: str
    method: str
    url: str
    owner: int | None = None
    data: dict | None = None
    headers: dict | None = None
    missing: int = 404
    lead: int | None = None


def obj(method, url, owner, **kw) -> Call:
    return Call("object", method, url, owner, **kw)


def led(method, url, owner, **kw) -> Call:
    """An object call the lead of the owner's team makes as the owner would."""
    return Call("object", method, url, owner, lead=owner, **kw)


def team(method, url, lead, **kw) -> Call:
    return Call("team", method, url, lead=lead, **kw)


def lst(url, owner=200) -> Call:
    return Call("list", "get", url, owner)


def none(method, url, **kw) -> Call:
    return Call("none", method, url, **kw)


TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}
J = "/jobs/{job}"
A = "/api/v1/jobs/{job}"

ROWS: dict[str, list[Call]] = {
    # the pages (jobs/web/urls.py)
    "login/": [none("get", "/login/")],
    "logout/": [none("post", "/logout/")],
    "i18n/setlang/": [none("post", "/i18n/setlang/", data={"language": "en"})],
    "": [lst("/")],
    "jobs/new": [none("get", "/jobs/new"), Call("list", "get", "/jobs/new?again={job}", 200, lead=200)],
    "uploads/": [Call("list", "get", "/uploads/", 200, headers=TUS)],
    "uploads/<uuid:upload_id>": [obj("get", "/uploads/{upload}", 200, headers=TUS),
                                 obj("head", "/uploads/{upload}", 200, headers=TUS),
                                 obj("patch", "/uploads/{upload}", 409, headers={
                                     **TUS, "HTTP_UPLOAD_OFFSET": "0", "CONTENT_TYPE": "application/offset+octet-stream"},
                                     data=b"x"),
                                 obj("delete", "/uploads/{upload}", 204, headers=TUS)],
    "uploads/<uuid:upload_id>/preview": [obj("get", "/uploads/{upload}/preview", 200)],
    "jobs/live.json": [lst("/jobs/live.json")],
    "folders": [none("get", "/folders")],
    "folders/check": [none("get", "/folders/check?path=/srv/ffportal/storage")],
    "usage": [none("get", "/usage")],
    "bookings/": [lst("/bookings/")],
    "bookings/new": [none("get", "/bookings/new")],
    "bookings/calendar": [lst("/bookings/calendar")],
    "bookings/<uuid:booking_id>": [obj("get", "/bookings/{booking}", 200)],
    "bookings/<uuid:booking_id>/cancel": [obj("post", "/bookings/{booking}/cancel", 302)],
    "usage.csv": [none("get", "/usage.csv")],
    "account": [none("get", "/account")],
    "account/email": [none("post", "/account/email", data={"email": "new@example.org"})],
    "account/email/<str:token>": [none("get", "/account/email/not-a-token")],
    "account/language": [none("get", "/account/language")],
    "account/notifications": [none("get", "/account/notifications")],
    "account/password": [none("get", "/account/password")],
    "account/webhook-secret": [none("post", "/account/webhook-secret")],
    "webhooks/": [lst("/webhooks/")],
    "webhooks/<uuid:delivery_id>/send-again": [obj("post", "/webhooks/{delivery}/send-again", 302)],
    "usage/email": [none("get", "/usage/email")],
    "jobs/<uuid:job_id>": [led("get", J, 200)],
    "jobs/<uuid:job_id>/live.json": [led("get", J + "/live.json", 200)],
    "jobs/<uuid:job_id>/cancel": [led("post", J + "/cancel", 302)],
    "jobs/<uuid:job_id>/retry": [led("post", J + "/retry", 302)],
    "jobs/<uuid:job_id>/delete": [obj("post", J + "/delete", 302)],  # the owner's alone
    "jobs/<uuid:job_id>/targets/<int:index>/replace": [obj("post", J + "/targets/1/replace", 302, data="photo")],
    "jobs/<uuid:job_id>/sources/<int:n>": [led("get", J + "/sources/0", 200)],
    "jobs/<uuid:job_id>/targets/<int:index>": [led("get", J + "/targets/0", 200)],
    "jobs/<uuid:job_id>/outputs/<int:index>": [led("get", J + "/outputs/0", 200),
                                               led("get", J + "/outputs/0?download=1", 200)],
    "jobs/<uuid:job_id>/thumbs/<int:index>": [led("get", J + "/thumbs/0", 200)],
    "jobs/<uuid:job_id>/inputs/<int:index>": [led("get", J + "/inputs/0", 200),
                                              led("get", J + "/inputs/0?download=1", 200)],
    "jobs/<uuid:job_id>/results.zip": [led("get", J + "/results.zip", 200)],
    # a team lead's pages (jobs/web/views/teams.py)
    "teams/": [none("get", "/teams/")],  # the teams one leads: a redirect to the one, or 404
    "teams/<str:account>/": [team("get", "/teams/vfx/", 200)],
    "teams/<str:account>/members/<int:user_id>/limits": [
        team("post", "/teams/vfx/members/{owner_pk}/limits", 302, data={"gpu_hours_per_month": "5"})],
    "teams/<str:account>/templates": [team("post", "/teams/vfx/templates", 302, data={"template": "{template}"})],
    "teams/<str:account>/bookings/<uuid:booking_id>": [
        team("post", "/teams/vfx/bookings/{booking}", 302, data={"decision": "refuse", "reason": "not now"})],
    # the JSON API (jobs/api/urls.py)
    "api/v1/jobs": [lst("/api/v1/jobs"), none("post", "/api/v1/jobs", data={}),
                    team("get", "/api/v1/jobs?team=vfx", 200, missing=200)],
    "api/v1/jobs/<uuid:job_id>": [led("get", A, 200), obj("delete", A, 200)],
    "api/v1/jobs/<uuid:job_id>/cancel": [led("post", A + "/cancel", 409)],
    "api/v1/jobs/<uuid:job_id>/retry": [led("post", A + "/retry", 202)],
    "api/v1/jobs/<uuid:job_id>/results.zip": [led("get", A + "/results.zip", 200)],
    "api/v1/jobs/<uuid:job_id>/tasks": [led("get", A + "/tasks", 200)],
    "api/v1/jobs/<uuid:job_id>/outputs": [led("get", A + "/outputs", 200)],
    "api/v1/jobs/<uuid:job_id>/outputs/<int:index>": [led("get", A + "/outputs/0", 200)],
    "api/v1/templates": [none("get", "/api/v1/templates")],
    "api/v1/folders": [none("get", "/api/v1/folders")],
    "api/v1/bookings": [lst("/api/v1/bookings")],
    "api/v1/bookings/<uuid:booking_id>": [obj("get", "/api/v1/bookings/{booking}", 200),
                                          obj("delete", "/api/v1/bookings/{booking}", 200)],
    "api/v1/^.*$": [none("get", "/api/v1/no-such-thing")],
    # for monitors (jobs/ops): no one's work
    "healthz": [none("get", "/healthz")],
    "readyz": [none("get", "/readyz")],
    "metrics": [none("get", "/metrics")],
}
#: the live sockets (jobs/live/routing.py): "list" or "object", as above
WS_ROWS = {"ws/jobs/": "list", "ws/jobs/<uuid:job_id>/": "object"}
#: the admin: its own tests in test_access_matrix_admin.py (its face files need jobs.see_faces)
NOT_HERE = ("admin/",)


def http_routes(patterns=None, prefix: str = "") -> set[str]:
    """Every route of the site, includes followed, as "prefix + pattern" strings."""
    found = set()
    for p in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            if route not in NOT_HERE:
                found |= http_routes(p.url_patterns, route)
        else:
            found.add(route)
    return found


def test_every_endpoint_has_a_row():
    assert http_routes() == set(ROWS), "a new endpoint needs a row in ROWS (who may reach it)"
    assert {str(p.pattern) for p in websocket_urlpatterns} == set(WS_ROWS)


# ---- the pages and the API, each row as each caller --------------------------------------------

def body_of(response) -> str:
    if response.streaming:  # the test client closes it once read (closing it here would close the database)
        data = b"".join(response.streaming_content)
    else:
        data = response.content
    return data.decode("utf-8", "replace")


def send(client: Client, call: Call, ids: dict, jpeg_bytes: bytes):
    url = call.url.format(**ids)
    headers = dict(call.headers or {})
    data = {k: v.format(**ids) for k, v in call.data.items()} if isinstance(call.data, dict) else call.data
    if data == "photo":
        data = {"file": SimpleUploadedFile("fixed.jpg", jpeg_bytes, content_type="image/jpeg")}
    if isinstance(data, bytes):
        return getattr(client, call.method)(url, data=data, content_type=headers.pop("CONTENT_TYPE"), **headers)
    if call.method in ("get", "head", "delete"):
        return getattr(client, call.method)(url, **headers)
    return getattr(client, call.method)(url, data or {}, **headers)


def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("who", CALLERS)
@pytest.mark.parametrize("route", sorted(ROWS))
def test_only_the_owner_reaches_their_work(route, who, callers, world, jpeg_bytes):
    ids = {**world.ids, **world.extra}
    missing_ids = {**{k: str(uuid.uuid4()) for k in world.ids}, **world.extra}
    for call in ROWS[route]:
        before = world.state()
        r = send(client_of(callers[who]), call, ids, jpeg_bytes)
        body = body_of(r)
        if (who == "owner" and call.kind != "team") or (who == "lead" and call.lead is not None):
            expected = call.owner if who == "owner" else call.lead
            if expected is not None:
                assert r.status_code == expected, (call, body[:500])
            if call.kind == "list" or (call.kind == "team" and r.status_code == 200):
                assert any(m in body for m in world.markers), call
            continue
        # An id the caller sent may come back (the page's own address, in its language switch): not a leak.
        leaked = [m for m in world.markers if m in body and m not in call.url.format(**world.ids)]
        assert not leaked, (call, leaked)
        if call.kind == "object":
            missing = send(client_of(callers[who]), call, missing_ids, jpeg_bytes)
            assert (r.status_code, missing.status_code) == (call.missing, call.missing), call
        elif call.kind == "list":
            assert r.status_code == call.owner, (call, body[:500])
        elif call.kind == "team":
            assert r.status_code == call.missing, (call, body[:500])
        assert world.state() == before, call


# ---- the live sockets ----------------------------------------------------------------------------

def run_async(test):
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return async_to_sync(test)(*args, **kwargs)
    return wrapper


@pytest.fixture
def _own_layer_prefix(settings):
    import copy

    from channels.layers import get_channel_layer

    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["prefix"] = f"test-{uuid.uuid4().hex[:12]}"
    settings.CHANNEL_LAYERS = layers
    yield
    async_to_sync(get_channel_layer().flush)()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("who", CALLERS)
@pytest.mark.parametrize("route", sorted(WS_ROWS))
def test_a_socket_shows_only_the_owners_own_jobs(route, who, callers, world, _own_layer_prefix):
    path = "/" + route.replace("<uuid:job_id>", "{job}").format(**world.ids)

    @run_async
    async def check():
        reaches = who == "owner" or (who == "lead" and WS_ROWS[route] == "object")  # a lead follows a team job
        if WS_ROWS[route] == "object" and not reaches:
            assert await refusal_code(path, callers[who]) == CLOSE_NOT_FOUND
            assert await refusal_code(path.replace(world.ids["job"], str(uuid.uuid4())), callers[who]) == CLOSE_NOT_FOUND
            return
        comm = await connect(path, callers[who])
        snapshot = await comm.receive_from()
        await comm.disconnect()
        assert any(m in snapshot for m in world.markers) == reaches, snapshot[:300]

    check()


# ---- team folders: the folder browser ------------------------------------------------------------

@pytest.mark.parametrize("who", CALLERS)
def test_the_folder_browser_lists_a_team_folder_to_its_team_only(who, callers, world):
    """The top of the browser (page and API) offers the vfx team's folder to its members and lead
    only; staff, a superuser and the other team never see it (jobs.clusters.team_roots)."""
    Team.objects.filter(slurm_account="vfx").update(target_roots=["/srv/ffportal/storage/teams/vfx-secret"])
    client = client_of(callers[who])
    answers = [body_of(client.get("/folders")), body_of(client.get("/api/v1/folders"))]
    in_team = who in ("owner", "member", "lead")
    assert all(("vfx-secret" in body) == in_team for body in answers), (who, [b[:300] for b in answers])
