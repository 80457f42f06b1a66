"""Email through a REAL SMTP server (aiosmtpd on 127.0.0.1, started here) and a REAL RQ worker.

A job ends through the watcher's path (CannedSlurm answering with captured Slurm output); the
notification is enqueued on commit, run by a burst `SimpleWorker` on a Redis queue of its own,
and sent over SMTP with Django's SMTP backend. Nothing is patched between the watcher and the
socket except which Redis queue "default" is (so parallel test runs never share one).
"""
import runpy
import socket
import uuid
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from email import message_from_bytes, policy
from pathlib import Path
from types import SimpleNamespace

import django_rq
import pytest
import redis
from aiosmtpd.controller import Controller
from django.core.exceptions import ImproperlyConfigured
from rq import Queue, SimpleWorker

from jobs.models import EmailNotice, Job, JobStatus, NoticeStatus, NotificationPreference, Quota, UsageRecord
from jobs.usage.accounting import month_of
from jobs.usage.notifications import job_subject, notify_job_finished, notify_quota

from .test_watcher import SAMPLES, CannedSlurm, done, fake, make_job, record, settle  # noqa: F401 - fixture

SITE = "https://portal.example.org"
PASSWORD = "hunter2-smtp-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Inbox:
    """aiosmtpd handler: keeps every message it is given (or refuses them all with `reply`)."""

    def __init__(self, reply: str = "250 Message accepted"):
        self.reply = reply
        self.envelopes = []

    async def handle_DATA(self, server, session, envelope):
        if self.reply.startswith("250"):
            self.envelopes.append(envelope)
        return self.reply

    @property
    def messages(self):
        return [message_from_bytes(e.content, policy=policy.default) for e in self.envelopes]


def use_smtp(settings, port: int) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"  # pytest-django sets locmem
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER, settings.EMAIL_HOST_PASSWORD = "", ""
    settings.EMAIL_TIMEOUT = 5
    settings.DEFAULT_FROM_EMAIL = "FaceFusion Portal <portal@example.org>"
    settings.SITE_URL = SITE


def start_smtp(inbox: Inbox) -> Controller:
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    return controller


@pytest.fixture
def inbox(settings):
    box = Inbox()
    controller = start_smtp(box)
    use_smtp(settings, controller.port)
    yield box
    controller.stop()


@pytest.fixture
def rq_default(settings, monkeypatch, inline_rq):
    """The "default" queue, on a Redis queue of this test's own; `.run()` works it off (burst).

    Emails go through real RQ; the watcher's output fetches still run inline (`inline_rq`), so
    a job can end without a worker running."""
    connection = redis.Redis.from_url(settings.REDIS_URL)
    queue = Queue(f"test-email-{uuid.uuid4().hex}", connection=connection, serializer=settings.RQ_SERIALIZER)
    asked = []

    def get_queue(name="default", **kwargs):
        asked.append(name)
        return queue

    class Router:
        def enqueue(self, func, *args, **kwargs):
            if str(func).startswith("jobs.usage.notifications."):
                return django_rq.get_queue("default").enqueue(func, *args, **kwargs)
            return inline_rq.enqueue(func, *args, **kwargs)

        def enqueue_many(self, datas):  # the watcher's output fetches
            return inline_rq.enqueue_many(datas)

    monkeypatch.setattr(django_rq, "get_queue", get_queue)
    monkeypatch.setattr("jobs.background.enqueue.queue", Router)

    def run():
        SimpleWorker([queue], connection=connection, serializer=queue.serializer).work(burst=True)

    yield SimpleNamespace(queue=queue, asked=asked, run=run)
    queue.delete(delete_jobs=True)


def end_job_through_the_watcher(fake, owner, template, capture, name="Holiday"):
    """A 4-task array ends with 3 images done and 1 failed (sacct_array_mixed), as the watcher sees it."""
    job = make_job(owner, template, "33", tasks=4, name=name)
    progress = "".join(record(job, n, [done(n)]) for n in (0, 1, 3))
    progress += record(job, 2, [{**done(2), "status": "failed", "message": "2.jpg is corrupt"}])
    fake(CannedSlurm(sacct=(SAMPLES / "sacct_array_mixed.json").read_text(),
                     codes=(SAMPLES / "sacct_array_mixed.txt").read_text(), progress=progress))
    with capture(execute=True):
        settle(template.cluster)
    job.refresh_from_db()
    return job


def ended(owner, template, status, **fields) -> Job:
    fields.setdefault("finished_at", datetime.now(dt_timezone.utc))
    return Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                              cluster=template.cluster, status=status, **fields)


def parts(message) -> dict[str, str]:
    return {p.get_content_type(): p.get_content() for p in message.walk() if not p.is_multipart()}


# ---- job emails ----------------------------------------------------------------------------------

def test_a_finished_job_emails_its_owner(fake, owner, template, inbox, rq_default, django_capture_on_commit_callbacks):
    job = end_job_through_the_watcher(fake, owner, template, django_capture_on_commit_callbacks)
    assert job.status == JobStatus.PARTIALLY_FAILED
    assert rq_default.asked == ["default", "default"] and rq_default.queue.count == 2  # the job's email, the quota check
    assert inbox.envelopes == []  # nothing is sent by the watcher itself
    rq_default.run()
    assert len(inbox.envelopes) == 1
    envelope, message = inbox.envelopes[0], inbox.messages[0]
    assert envelope.rcpt_tos == ["alice@example.org"] and envelope.mail_from == "portal@example.org"
    assert message["To"] == "alice@example.org"
    # .strip(): Python's compat32 folding (Django's) puts the encoded words on a continuation line
    assert message["Subject"].strip() == "[FaceFusion Portal] Job “Holiday” partially failed — 1 of 4 photos and videos failed"
    assert message.get_content_type() == "multipart/alternative"
    body = parts(message)
    assert set(body) == {"text/plain", "text/html"}
    link = f"{SITE}/jobs/{job.id}"
    assert link in body["text/plain"] and f'href="{link}"' in body["text/html"]
    assert "3 of 4" in body["text/plain"] and "1 of 4 photos and videos failed" in body["text/plain"]
    assert f"{SITE}/account#notifications" in body["text/plain"]  # where to turn them off
    notice = EmailNotice.objects.get(job=job)
    assert notice.status == NoticeStatus.SENT and notice.sent_at and notice.to == "alice@example.org"


@pytest.mark.parametrize("status, done_, failed, expected", [
    (JobStatus.COMPLETED, 40, 0, "Job “Holiday” completed — 40 of 40 photos and videos"),
    (JobStatus.PARTIALLY_FAILED, 37, 3, "Job “Holiday” partially failed — 3 of 40 photos and videos failed"),
    (JobStatus.FAILED, 0, 40, "Job “Holiday” failed — 40 of 40 photos and videos failed"),
])
def test_the_subject_says_how_it_ended(owner, template, status, done_, failed, expected):
    job = Job(owner=owner, name="Holiday", status=status, total=40, done=done_, failed=failed,
              template_snapshot=template.snapshot().to_json())
    assert job_subject(job) == f"[FaceFusion Portal] {expected}"


def test_the_subject_holds_one_line(owner):
    job = Job(owner=owner, name="two\r\nlines" + "x" * 200, status=JobStatus.COMPLETED, total=1, done=1)
    subject = job_subject(job)
    assert "\n" not in subject and "\r" not in subject and "two lines" in subject and len(subject) < 160
    untitled = Job(owner=owner, status=JobStatus.COMPLETED, total=1, done=1)
    assert f"Untitled job {str(untitled.id)[:8]}" in job_subject(untitled)


def test_an_opted_out_owner_gets_no_email(fake, owner, template, inbox, rq_default, django_capture_on_commit_callbacks):
    NotificationPreference.objects.create(user=owner, job_emails=False)
    job = end_job_through_the_watcher(fake, owner, template, django_capture_on_commit_callbacks)
    rq_default.run()
    assert inbox.envelopes == []
    notice = EmailNotice.objects.get(job=job)
    assert notice.status == NoticeStatus.SKIPPED and "opted out" in notice.error


def test_an_owner_without_an_address_gets_no_email(owner, template, inbox):
    owner.email = ""
    owner.save()
    job = ended(owner, template, JobStatus.COMPLETED)
    assert notify_job_finished(str(job.id)) == NoticeStatus.SKIPPED
    assert inbox.envelopes == []


def test_a_cancelled_job_sends_nothing(owner, template, inbox):
    job = ended(owner, template, JobStatus.CANCELLED)
    assert notify_job_finished(str(job.id)) == ""
    assert inbox.envelopes == [] and not EmailNotice.objects.exists()


def test_a_job_is_emailed_once(owner, template, inbox):
    job = ended(owner, template, JobStatus.COMPLETED, total=1, done=1)
    assert notify_job_finished(str(job.id)) == NoticeStatus.SENT
    assert notify_job_finished(str(job.id)) == ""  # enqueued twice (a retried RQ job): sent once
    assert len(inbox.envelopes) == 1


# ---- a failing SMTP server -------------------------------------------------------------------------

def test_smtp_down_the_job_still_completes_and_the_failure_is_logged(
        settings, fake, owner, template, rq_default, caplog, django_capture_on_commit_callbacks):
    use_smtp(settings, free_port())  # nothing listens there
    settings.EMAIL_HOST_USER, settings.EMAIL_HOST_PASSWORD = "portal", PASSWORD
    job = end_job_through_the_watcher(fake, owner, template, django_capture_on_commit_callbacks)
    finished_at = job.finished_at
    rq_default.run()
    job.refresh_from_db()
    assert job.status == JobStatus.PARTIALLY_FAILED and job.finished_at == finished_at  # untouched
    assert UsageRecord.objects.filter(job=job).exists()
    assert rq_default.queue.failed_job_registry.count == 0  # the RQ task itself did not crash either
    notice = EmailNotice.objects.get(job=job)
    assert notice.status == NoticeStatus.FAILED and "ConnectionRefusedError" in notice.error
    assert f"email job:{job.id} to alice@example.org not sent" in caplog.text
    assert "ConnectionRefusedError" in caplog.text
    assert PASSWORD not in caplog.text and PASSWORD not in notice.error


def test_a_server_that_refuses_the_message_is_recorded_and_retried_next_time(settings, owner, template, caplog):
    refusing = Inbox(reply="554 5.7.1 Message rejected")
    controller = start_smtp(refusing)
    use_smtp(settings, controller.port)
    job = ended(owner, template, JobStatus.COMPLETED, total=1, done=1)
    try:
        assert notify_job_finished(str(job.id)) == NoticeStatus.FAILED
        assert "554" in EmailNotice.objects.get(job=job).error and "not sent" in caplog.text
        refusing.reply = "250 OK"  # the server is fixed; the same notice is sent when asked again
        assert notify_job_finished(str(job.id)) == NoticeStatus.SENT
    finally:
        controller.stop()
    assert len(refusing.envelopes) == 1 and EmailNotice.objects.get(job=job).status == NoticeStatus.SENT


# ---- quota emails ---------------------------------------------------------------------------------

NOW = datetime(2026, 7, 20, 12, tzinfo=dt_timezone.utc)


def charge(user, template, hours: float, when=NOW) -> None:
    job = ended(user, template, JobStatus.COMPLETED, finished_at=when)
    UsageRecord.objects.create(job=job, user=user, period=month_of(when), gpu_seconds=hours * 3600)


def subjects(inbox) -> list[str]:
    return [m["Subject"].strip() for m in inbox.messages]


def test_quota_emails_go_at_80_and_100_percent_once_each(owner, template, inbox):
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    charge(owner, template, 7)
    assert notify_quota(owner.pk, now=NOW) == [] and inbox.envelopes == []
    charge(owner, template, 1.5)
    assert notify_quota(owner.pk, now=NOW) == ["quota_80"]
    assert notify_quota(owner.pk, now=NOW) == []  # once per threshold per month
    charge(owner, template, 2)
    assert notify_quota(owner.pk, now=NOW) == ["quota_100"]
    assert notify_quota(owner.pk, now=NOW) == []
    assert subjects(inbox) == [
        "[FaceFusion Portal] You have used 80 % of your GPU-hours this month (8.5 of 10)",
        "[FaceFusion Portal] You have used all your GPU-hours this month (10.5 of 10)",
    ]
    assert [e.rcpt_tos for e in inbox.envelopes] == [["alice@example.org"]] * 2
    body = parts(inbox.messages[0])
    assert "8.5 of your 10 GPU-hours" in body["text/plain"] and "1.5 are left" in body["text/plain"]
    assert "2026-08-01" in body["text/plain"] and "text/html" in body


def test_a_new_month_starts_over(owner, template, inbox):
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    charge(owner, template, 9)
    assert notify_quota(owner.pk, now=NOW) == ["quota_80"]
    august = datetime(2026, 8, 3, tzinfo=dt_timezone.utc)
    assert notify_quota(owner.pk, now=august) == []  # nothing used in August yet
    charge(owner, template, 8, when=august)
    assert notify_quota(owner.pk, now=august) == ["quota_80"]
    assert len(inbox.envelopes) == 2


def test_a_jump_past_both_thresholds_sends_only_the_100_percent_email(owner, template, inbox):
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    charge(owner, template, 12)
    assert notify_quota(owner.pk, now=NOW) == ["quota_100", "quota_80"]
    assert subjects(inbox) == ["[FaceFusion Portal] You have used all your GPU-hours this month (12 of 10)"]
    assert EmailNotice.objects.get(kind="quota_80").status == NoticeStatus.SKIPPED


def test_a_group_quota_counts_every_member(owner, colleague, team, template, inbox):
    Quota.objects.create(group=team, gpu_hours_per_month=10)
    charge(owner, template, 5)
    charge(colleague, template, 3.5)
    assert notify_quota(owner.pk, now=NOW) == ["quota_80"]
    assert subjects(inbox) == [
        "[FaceFusion Portal] Your group has used 80 % of its GPU-hours this month (8.5 of 10, group vfx)"]


def test_quota_emails_respect_the_opt_out(owner, template, inbox):
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    NotificationPreference.objects.create(user=owner, quota_emails=False)
    charge(owner, template, 9)
    assert notify_quota(owner.pk, now=NOW) == ["quota_80"]
    assert inbox.envelopes == [] and EmailNotice.objects.get().status == NoticeStatus.SKIPPED


def test_no_quota_no_email(owner, template, inbox):
    charge(owner, template, 1000)
    assert notify_quota(owner.pk, now=NOW) == [] and inbox.envelopes == []


def test_the_quota_email_follows_the_charge_of_an_ended_job(
        fake, owner, template, inbox, rq_default, django_capture_on_commit_callbacks):
    Quota.objects.create(user=owner, gpu_hours_per_month="0.01")  # 36 GPU-seconds
    charge(owner, template, 0.009, when=datetime.now(dt_timezone.utc))  # 32.4 s: 90 % before the job
    end_job_through_the_watcher(fake, owner, template, django_capture_on_commit_callbacks)  # +4 GPU-seconds
    rq_default.run()
    assert sorted(subjects(inbox)) == [
        "[FaceFusion Portal] Job “Holiday” partially failed — 1 of 4 photos and videos failed",
        "[FaceFusion Portal] You have used all your GPU-hours this month (0.01 of 0.01)",
    ]


# ---- settings from the environment ----------------------------------------------------------------

SETTINGS = Path(__file__).resolve().parents[2] / "portal" / "settings.py"
EMAIL_ENV = ("EMAIL_BACKEND", "EMAIL_HOST", "EMAIL_PORT", "EMAIL_HOST_USER", "EMAIL_HOST_PASSWORD", "EMAIL_USE_TLS",
             "EMAIL_USE_SSL", "EMAIL_TIMEOUT", "DEFAULT_FROM_EMAIL")


@pytest.fixture
def clean_env(monkeypatch):
    for name in EMAIL_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_smtp_settings_come_from_the_environment(clean_env):
    assert runpy.run_path(str(SETTINGS))["EMAIL_BACKEND"] == "django.core.mail.backends.console.EmailBackend"
    for name, value in {"EMAIL_HOST": "smtp.example.org", "EMAIL_PORT": "587", "EMAIL_HOST_USER": "portal",
                        "EMAIL_HOST_PASSWORD": "pw", "EMAIL_USE_TLS": "true", "DEFAULT_FROM_EMAIL": "p@example.org"}.items():
        clean_env.setenv(name, value)
    s = runpy.run_path(str(SETTINGS))
    assert s["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert (s["EMAIL_HOST"], s["EMAIL_PORT"], s["EMAIL_HOST_USER"], s["EMAIL_USE_TLS"], s["EMAIL_USE_SSL"]) == (
        "smtp.example.org", 587, "portal", True, False)
    assert s["EMAIL_TIMEOUT"] == 10 and s["DEFAULT_FROM_EMAIL"] == "p@example.org"


def test_tls_and_ssl_together_are_refused(clean_env):
    clean_env.setenv("EMAIL_USE_TLS", "true")
    clean_env.setenv("EMAIL_USE_SSL", "true")
    with pytest.raises(ImproperlyConfigured, match="exclusive"):
        runpy.run_path(str(SETTINGS))


@pytest.fixture(autouse=True)
def _utc(settings):
    settings.TIME_ZONE = "UTC"


# ---- every email in its reader's language ----------------------------------------------------------

#: (language, the job's subject, the quota's subject, the booking's subject, the retention's subject,
#: the email-change link's subject, the changed notice's subject)
LANGUAGES = {
    "en": ("Job “Holiday” completed — 1 of 1 photos and videos", "You have used 80 % of your GPU-hours",
           "Your booking “Episode 5” is confirmed", "The files of job “Holiday” will be deleted on",
           "Confirm your new email address", "Your email address was changed"),
    "zh-hans": ("任务“Holiday”已完成 — 1 个照片和视频中完成 1 个", "您本月已用掉 80% 的 GPU 小时",
                "您的预约“Episode 5”已确认", "任务“Holiday”的文件将于", "确认您的新邮箱地址", "您的邮箱地址已更改"),
}


@pytest.fixture
def reader_of(owner, settings):
    """The owner, reading in `language`: chosen on the account page, and the language of their jobs."""
    from jobs.models.preferences import LanguagePreference

    settings.SITE_URL = SITE

    def choose(language: str):
        LanguagePreference.choose(owner, language)
        return owner
    return choose


def only_mail(mailoutbox):
    (message,) = mailoutbox
    return message.subject, message.body, message.alternatives[0][0]


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_job_email_is_in_the_jobs_language(reader_of, template, mailoutbox, language):
    job = ended(reader_of(language), template, JobStatus.COMPLETED, total=1, done=1, name="Holiday", language=language)
    assert notify_job_finished(str(job.id)) == NoticeStatus.SENT
    subject, text, html = only_mail(mailoutbox)
    assert LANGUAGES[language][0] in subject
    done = {"en": "Your job “Holiday” has completed.", "zh-hans": "您的任务“Holiday”已完成。"}[language]
    assert done in text and ("See the results" if language == "en" else "查看结果") in html


def test_a_job_started_in_chinese_is_emailed_in_chinese_whatever_the_server_speaks(owner, template, mailoutbox,
                                                                                   settings):
    settings.LANGUAGE_CODE = "en"
    job = ended(owner, template, JobStatus.FAILED, total=2, failed=2, name="Holiday", language="zh-hans")
    notify_job_finished(str(job.id))
    subject, text, _ = only_mail(mailoutbox)
    assert "失败" in subject and "failed" not in subject and "Hello" not in text and "您好" in text


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_quota_email_is_in_the_readers_language(reader_of, template, mailoutbox, language):
    user = reader_of(language)
    Quota.objects.create(user=user, gpu_hours_per_month=10)
    charge(user, template, 8.5)
    assert notify_quota(user.pk, now=NOW) == ["quota_80"]
    subject, text, html = only_mail(mailoutbox)
    assert LANGUAGES[language][1] in subject and "2026-08-01" in text
    assert ("New jobs" not in text and "GPU 小时" in html) if language != "en" else "1.5 are left" in text


def test_without_a_chosen_language_the_quota_email_follows_the_last_job(owner, template, mailoutbox):
    Quota.objects.create(user=owner, gpu_hours_per_month=10)
    charge(owner, template, 8.5)
    Job.objects.filter(owner=owner).update(language="zh-hans")
    notify_quota(owner.pk, now=NOW)
    assert LANGUAGES["zh-hans"][1] in only_mail(mailoutbox)[0]


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_booking_email_is_in_the_bookings_language(reader_of, profile, mailoutbox, language):
    from jobs.models import Booking, BookingState
    from jobs.webhooks.events import email_booking_event

    booking = Booking.objects.create(user=reader_of(language), task_name="Episode 5", duration_minutes=60,
                                     cluster=profile, state=BookingState.CONFIRMED, language=language,
                                     starts_at=NOW, ends_at=NOW + timedelta(hours=1))
    assert email_booking_event(str(booking.id), "confirmed") == NoticeStatus.SENT
    subject, text, _ = only_mail(mailoutbox)
    assert LANGUAGES[language][2] in subject
    assert ("The GPUs are held for you in that time." in text) == (language == "en")


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_retention_notice_is_in_the_jobs_language(reader_of, template, mailoutbox, language):
    from jobs.results import retention

    job = ended(reader_of(language), template, JobStatus.COMPLETED, name="Holiday", language=language)
    assert retention.send_notice(str(job.id)) == NoticeStatus.SENT
    subject, text, _ = only_mail(mailoutbox)
    assert LANGUAGES[language][3] in subject
    assert ("Download what you want to keep" in text) == (language == "en")


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_email_change_mails_are_in_the_language_asked_in(reader_of, mailoutbox, language):
    from jobs.usage.notifications import send_email_change_link, send_email_changed_notice

    user = reader_of(language)
    assert send_email_change_link(user.pk, "new@example.org", language)
    assert send_email_changed_notice(user.pk, "old@example.org", language)
    assert [m.subject.split("] ", 1)[1] for m in mailoutbox] == list(LANGUAGES[language][4:])
