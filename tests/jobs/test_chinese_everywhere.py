"""A walk through the portal as a user who chose 简体中文: every user page and every email, and no
English word left in what the user reads.

What is read: the text of a page (tags, scripts' code, styles and attribute values stripped), the
words the live script will write (<template id="live-strings">), and both parts of every email.
What may stay in Latin letters: names (of people, jobs, files, folders, GPUs), units, and the
portal's name; Slurm's own words only inside the job page's "Technical details", each after its
plain words. A failure prints every English word found, with the text around it.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone, translation

import cluster.states
from jobs.models import Booking, BookingState, GpuType, Job, JobStatus, Quota, Target, TargetStatus, Task, UsageRecord
from jobs.models.attempt import JobAttempt
from jobs.models.preferences import LanguagePreference
from jobs.results import retention
from jobs.results.target_words import target_message
from jobs.usage.accounting import month_of
from jobs.usage.notifications import (
    notify_job_finished,
    notify_quota,
    send_email_change_link,
    send_email_changed_notice,
)
from jobs.webhooks.events import email_booking_event

#: a fixed moment (no test here depends on the day it runs)
NOW = datetime(2026, 11, 18, 9, 30, tzinfo=dt_timezone.utc)

#: words in Latin letters a Chinese reader may meet: units, file kinds, the product's and
#: languages' own names (the language switch names English in English, "EN" on a phone), and acronyms Chinese
#: texts use as they are
ALLOWED = {
    "facefusion", "portal", "gpu", "gpus", "cpu", "gb", "mb", "kb", "tb", "jpeg", "jpg", "png", "webp", "bmp",
    "tiff", "mp4", "mov", "mkv", "webm", "zip", "csv", "api", "url", "id", "json", "http", "https", "hmac",
    "sha", "english", "en", "h200", "ok", "utc", "nvidia",
}
#: what only the technical details may say: the cluster's words for a task
TECHNICAL = {"slurm", "completed", "failed", "pending", "running", "out_of_memory", "cancelled", "timeout"}
LATIN = re.compile(r"[A-Za-z][A-Za-z_]+")
#: a number the live script fills in ("{total} 个批次")
PLACEHOLDER = re.compile(r"\{\w+\}")
#: names the page shows as they were given: people, jobs, files, folders, hosts, addresses
NAMES = re.compile(r"[\w.+-]+@[\w-]+(?:\.[a-z]+)+|https?://[\w./?=&#%:-]+|(?:/[\w.\- ]+)+|[\w\-]+\.(?:jpe?g|png|mp4|mov|zip|csv)\b|\bgpu-node-\d\b",
                   re.IGNORECASE)


class _Text(HTMLParser):
    """The text a reader reads, in pieces: (text, inside the technical details)."""

    SKIP = {"script", "style"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.pieces: list[tuple[str, bool]] = []
        self._skip = 0
        self._stack: list[tuple[str, bool]] = []  # (tag, opens the technical details)

    @property
    def technical(self) -> bool:
        return any(flag for _, flag in self._stack)

    def handle_starttag(self, tag, attrs):
        if tag in {"br", "img", "input", "meta", "link", "hr", "source", "wbr"}:
            return
        self._stack.append((tag, tag == "details" and dict(attrs).get("id") == "technical"))
        if tag in self.SKIP:
            self._skip += 1

    def handle_endtag(self, tag):
        while self._stack:
            opened, _ = self._stack.pop()
            if opened in self.SKIP:
                self._skip -= 1
            if opened == tag:
                break

    def handle_data(self, data):
        if not self._skip and data.strip():
            self.pieces.append((data, self.technical))


def english_in(html: str, names: tuple[str, ...] = ()) -> list[str]:
    """Every English word of `html`'s readable text, each with the text it stands in."""
    parser = _Text()
    parser.feed(html)
    return english_in_pieces(parser.pieces, names)


def english_in_pieces(pieces, names: tuple[str, ...] = ()) -> list[str]:
    found = []
    for text, technical in pieces:
        bare = NAMES.sub(" ", PLACEHOLDER.sub(" ", text))
        for name in sorted(names, key=len, reverse=True):
            bare = bare.replace(name, " ")
        allowed = ALLOWED | (TECHNICAL if technical else set())
        words = [word for word in LATIN.findall(bare) if word.lower() not in allowed]
        if words:
            found.append(f"{' '.join(words)!r} in {' '.join(text.split())[:160]!r}")
    return found


def assert_chinese(what: str, html: str, names: tuple[str, ...] = ()) -> None:
    found = english_in(html, names)
    assert not found, f"{what}: English a Chinese reader meets:\n  " + "\n  ".join(found)


# ---- the checker checks ------------------------------------------------------------------------

def test_the_checker_finds_english_and_lets_names_units_and_technical_words_pass():
    assert english_in("<p>您的任务 <b>completed</b></p>") == ["'completed' in 'completed'"]
    assert english_in("<p>Times are in UTC.</p>") == ["'Times are in' in 'Times are in UTC.'"]
    assert english_in('<p title="Hello">任务</p><script>const x = "Hello";</script>') == []
    assert english_in("<p>bride.jpg 10 GB GPU /srv/storage/day 2</p>") == []
    assert english_in('<details id="technical"><p><span>失败</span> FAILED Slurm</p></details>') == []
    assert english_in("<p>FAILED</p>") == ["'FAILED' in 'FAILED'"]
    assert english_in("<p>婚礼 Wedding set</p>", names=("Wedding set",)) == []


# ---- the user ------------------------------------------------------------------------------------

#: names as users give them: a job, a template (written by an admin in Chinese), a cluster
JOB_NAME, TEMPLATE_NAME = "婚礼照片", "快速 GPU"


@pytest.fixture
def reader(owner):
    LanguagePreference.choose(owner, "zh-hans")
    owner.first_name = "Alice"
    owner.save()
    return owner


@pytest.fixture
def zh_client(client, reader):
    client.force_login(reader)
    client.cookies["django_language"] = "zh-hans"
    return client


@pytest.fixture
def chinese_template(template):
    template.name, template.description = TEMPLATE_NAME, "每个任务一块 GPU，适合少量照片。"
    template.save()
    return template


def worded(code: str, english: str = "", **params) -> str:
    """A target's message as the watcher stores it for a job started from a Chinese page."""
    with translation.override("zh-hans"):
        return target_message(code, params, english)


def task_reason(state: str, reason: str = "", exit_code=None) -> str:
    with translation.override("zh-hans"):
        return cluster.states.plain_reason(SimpleNamespace(state=state, reason=reason, exit_code=exit_code,
                                                           signal=None), "", translation.gettext)


@pytest.fixture
def busy_job(reader, chinese_template, jpeg_bytes, tmp_path):
    """A running job started from a Chinese page: tasks in every state, photos with the worker's words."""
    job = Job.objects.create(owner=reader, template=chinese_template, cluster=chinese_template.cluster,
                             template_snapshot=chinese_template.snapshot().to_json(), name=JOB_NAME,
                             language="zh-hans", status=JobStatus.RUNNING, slurm_job_id="4242", total=6, done=2,
                             failed=2, started_at=NOW - timedelta(minutes=20), created_at=NOW - timedelta(minutes=25))
    JobAttempt.objects.create(job=job, number=1, slurm_job_id="4242", mem="2G")
    for index, state, exit_code, reason in [(0, "COMPLETED", 0, ""), (1, "FAILED", 1, ""),
                                            (2, "PENDING", None, "Resources"), (3, "RUNNING", None, ""),
                                            (4, "OUT_OF_MEMORY", 137, "")]:
        Task.objects.create(job=job, index=index, state=state, exit_code=exit_code, node="gpu-node-1",
                            reason=task_reason(state, reason, exit_code), elapsed_seconds=60)
    messages = [
        (TargetStatus.DONE, ""),
        (TargetStatus.SKIPPED, worded("done_earlier")),
        (TargetStatus.SKIPPED, worded("", "output already present from an earlier attempt")),  # an older worker
        (TargetStatus.FAILED, worded("damaged", "cake.jpg is damaged", name="cake.jpg")),
        (TargetStatus.FAILED, worded("no_face", "no face found")),
        (TargetStatus.WAITING, ""),
    ]
    for index, (status, message) in enumerate(messages):
        Target.objects.create(job=job, index=index, name=f"photo-{index}.jpg", output_name=f"photo-{index}.jpg",
                              status=status, message=message, faces_swapped=1 if status == TargetStatus.DONE else 0)
    return job


# ---- the pages -------------------------------------------------------------------------------------

@pytest.fixture
def frozen(monkeypatch):
    monkeypatch.setattr(timezone, "now", lambda: NOW)


@pytest.fixture
def gpu(chinese_template):
    return GpuType.objects.create(cluster=chinese_template.cluster, gres_type="h200", label="H200 141 GB",
                                  memory_gb=141, compute_capability="9.0", inventory=2,
                                  nodes=[{"name": "vm", "gpus": 2, "cpus": 2}])


@pytest.fixture
def booking(reader, gpu):
    return Booking.objects.create(user=reader, task_name="第五集换脸", duration_minutes=120, gpu_count=1,
                                  cluster=gpu.cluster, gpu_type=gpu, state=BookingState.CONFIRMED,
                                  starts_at=NOW + timedelta(hours=2), ends_at=NOW + timedelta(hours=4),
                                  reservation_name="ffp-booking-1", language="zh-hans")


@pytest.fixture
def folder(chinese_template, tmp_path, fake_ssh):
    """A folder on the 'cluster' (here, through the real shell commands of the folder browser)."""
    from tests.fake_ssh import run_here

    root = tmp_path / "storage"
    (root / "day 2").mkdir(parents=True)
    (root / "portrait.jpg").write_bytes(b"x" * 2048)
    profile = chinese_template.cluster
    profile.target_roots = [str(root)]
    profile.save()
    fake_ssh(on_run=run_here)
    return root


def user_pages(job, booking, folder) -> dict[str, str]:
    return {
        "job list": reverse("job-list"),
        "New job": reverse("job-new"),
        "job page": reverse("job-detail", args=[job.id]),
        "a failed photo": reverse("job-target", args=[job.id, 3]),
        "a photo done earlier": reverse("job-target", args=[job.id, 1]),
        "bookings": reverse("booking-list"),
        "new booking": reverse("booking-new"),
        "a booking": reverse("booking-detail", args=[booking.id]),
        "account": reverse("account"),
        "webhooks": reverse("webhooks"),
        "usage": reverse("usage"),
        "folder roots": reverse("folder-browse"),
        "a folder": reverse("folder-browse") + f"?path={folder}",
    }


PAGES = ["job list", "New job", "job page", "a failed photo", "a photo done earlier", "bookings", "new booking",
         "a booking", "account", "webhooks", "usage", "folder roots", "a folder"]


@pytest.mark.parametrize("page", PAGES)
def test_every_user_page_reads_in_chinese(zh_client, reader, busy_job, booking, folder, frozen, page):
    r = zh_client.get(user_pages(busy_job, booking, folder)[page])
    assert r.status_code == 200, (page, r.status_code)
    body = r.content.decode()
    assert '<html lang="zh-hans">' in body
    assert_chinese(page, body, names=(reader.get_username(), reader.first_name, reader.email, "vfx", "Local",
                                      "ffp-booking-1", "H200 141 GB", "vm", "day 2",
                                      "callback_url"))


def test_the_job_page_says_each_task_state_in_words_and_slurm_only_under_technical_details(
        zh_client, busy_job, frozen):
    body = zh_client.get(reverse("job-detail", args=[busy_job.id])).content.decode()
    details = re.search(r'<details class="card technical" id="technical">(.*?)</details>', body, re.S).group(1)
    outside = body.replace(details, "")
    for word in ("COMPLETED", "FAILED", "PENDING", "Slurm"):
        assert word not in _visible(outside), word
    cells = re.findall(r'<span class="badge task-\w+">([^<]+)</span> <span class="mono task-code"[^>]*>([A-Z_]+)<', details)
    assert [state for _, state in cells] == ["COMPLETED", "FAILED", "PENDING", "RUNNING", "OUT_OF_MEMORY"]
    assert all(not LATIN.search(words) for words, _ in cells), cells  # plain words, in Chinese, before each
    assert "集群任务" in details
    assert "已由之前的运行完成" in body  # the worker's "output already present from an earlier attempt"


def _visible(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    return " ".join(text for text, _ in parser.pieces)


def test_the_same_pages_read_in_english_for_an_english_reader(client, owner, busy_job, frozen):
    LanguagePreference.choose(owner, "en")
    client.force_login(owner)
    body = client.get(reverse("job-detail", args=[busy_job.id])).content.decode()
    assert '<span class="badge task-ok">done</span> <span class="mono task-code"' in body
    assert "Cluster job" in body and "Slurm job" not in body


# ---- the emails ------------------------------------------------------------------------------------

def mails_text(messages) -> list[tuple[str, str]]:
    """(what, readable text) of each part of each message, subject included."""
    out = []
    for message in messages:
        out.append(("subject", message.subject))
        out.append(("text", message.body))
        for html, _ in message.alternatives:
            out.append(("html", _visible(html)))
    return out


def assert_mails_chinese(messages, names=()) -> None:
    assert messages
    found = []
    for part, text in mails_text(messages):
        found += [f"{part}: {f}" for f in english_in_pieces([(text, False)], names)]
    assert not found, "English in a Chinese email:\n  " + "\n  ".join(found)


@pytest.fixture
def site(settings):
    settings.SITE_URL = "https://portal.example.org"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


@pytest.mark.parametrize("status", [JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED])
def test_every_email_of_a_chinese_job_is_in_chinese(site, reader, busy_job, status):
    Job.objects.filter(pk=busy_job.pk).update(status=status, finished_at=NOW, error="")
    UsageRecord.objects.create(job=busy_job, user=reader, period=month_of(NOW), gpu_seconds=300)
    assert notify_job_finished(str(busy_job.id)) == "sent"
    assert_mails_chinese(mail.outbox, names=(JOB_NAME, TEMPLATE_NAME, "Alice"))


@pytest.mark.parametrize("hours", [8.5, 12])
def test_the_quota_emails_are_in_the_readers_language(site, reader, busy_job, team, hours):
    Quota.objects.create(group=team, gpu_hours_per_month=10)
    Job.objects.filter(pk=busy_job.pk).update(status=JobStatus.COMPLETED, finished_at=NOW)
    UsageRecord.objects.create(job=busy_job, user=reader, period=month_of(NOW), gpu_seconds=hours * 3600)
    assert notify_quota(reader.pk, now=NOW)
    assert_mails_chinese(mail.outbox, names=("Alice", "vfx"))


def test_the_booking_and_retention_emails_are_in_chinese(site, reader, busy_job, booking, settings):
    assert email_booking_event(str(booking.id), "confirmed") == "sent"
    Job.objects.filter(pk=busy_job.pk).update(status=JobStatus.COMPLETED, finished_at=NOW)
    assert retention.send_notice(str(busy_job.id)) == "sent"
    assert_mails_chinese(mail.outbox, names=("Alice", "H200 141 GB", JOB_NAME))


def test_the_email_change_mails_are_in_chinese(site, reader):
    assert send_email_change_link(reader.pk, "new@example.org", "zh-hans")
    assert send_email_changed_notice(reader.pk, "old@example.org", "zh-hans")
    assert_mails_chinese(mail.outbox, names=("Alice", reader.get_username()))


# ---- the admin's own scripts -----------------------------------------------------------------------

ADMIN_JS = Path(__import__("django").contrib.admin.__file__).parent / "static" / "admin" / "js"


def test_every_string_of_the_admins_scripts_has_a_chinese_translation(client, staff):
    """The admin's /admin/jsi18n/ in Chinese holds every string its scripts ask for (Django's own
    catalogue lacks the newer ones of the filter_horizontal widget: "Choose all 用户组")."""
    client.force_login(staff)
    client.cookies["django_language"] = "zh-hans"
    script = client.get("/admin/jsi18n/").content.decode()
    catalogue = json.loads(re.search(r"const newcatalog = (\{.*?\});\n", script, re.S).group(1))
    asked = set()
    for script in ADMIN_JS.rglob("*.js"):
        if "vendor" in script.parts:
            continue
        asked |= set(re.findall(r"\bgettext\((['\"])(.+?)(?<!\\)\1\)", script.read_text(encoding="utf-8")))
    missing = [text for _, text in sorted(asked) if text.replace(chr(92), "") not in catalogue
               and text not in catalogue]
    assert not missing, missing
    assert catalogue["Choose all %s"] == "全选%s"
