"""Estimates that know videos (duration x frame rate), and template cards in plain words: the time
100 photos take, measured per template when there is history, the time limit and the GPUs."""
import pytest
from django.db import transaction
from django.urls import reverse

from jobs.errors import QuotaExceeded
from jobs.models import Job, JobStatus, Quota, Target, Template
from jobs.quotas import check_quota, estimate_gpu_hours
from jobs.quotas.estimate import HISTORY_MIN_PHOTOS, measured_seconds_per_photo
from jobs.quotas.messages import plain_duration
from jobs.web.templatetags.quota import gpu_words, template_estimate


@pytest.fixture
def fast(profile):
    """1 GPU, 10 files per task at 0.1 s each, a 2-hour limit."""
    return Template.objects.create(name="Fast", slug="fast", cluster=profile, partition="gpu", gpu_count=1,
                                   gpu_type="a100", time_limit="02:00:00", chunk_size=10, seconds_per_image=0.1)


def test_a_minute_of_video_weighs_as_its_frames_not_as_one_image(fast):
    one_image = estimate_gpu_hours(fast, 1)
    minute_720p = estimate_gpu_hours(fast, 1, frames=60 * 30)  # 60 s at 30 fps
    assert one_image == pytest.approx((0.1 + 30) / 3600)
    assert minute_720p == pytest.approx((1801 * 0.1 + 30) / 3600)  # 0.058 GPU-hours, not 0.008
    assert minute_720p > 5 * one_image


def test_photos_alone_are_estimated_as_before(fast):
    assert estimate_gpu_hours(fast, 25) == estimate_gpu_hours(fast, 25, frames=0)
    assert estimate_gpu_hours(fast, 25) == pytest.approx((2 * (10 * 0.1 + 30) + (5 * 0.1 + 30)) / 3600)


def test_a_long_video_is_capped_by_the_time_limit_of_its_task(fast):
    fast.time_limit = "00:10:00"
    assert estimate_gpu_hours(fast, 1, frames=10**6) == pytest.approx(600 / 3600)


def test_the_quota_check_at_start_counts_a_videos_frames(owner, fast):
    Quota.objects.create(user=owner, gpu_hours_per_month=0.05)
    with transaction.atomic():
        check_quota(owner, fast, 1)  # one photo: well within
    with pytest.raises(QuotaExceeded, match="this job needs about 0.06"):
        with transaction.atomic():
            check_quota(owner, fast, 1, frames=60 * 30)


# ---- template cards ----

def finished_job(owner, template, seconds: list[float], videos: int = 0) -> Job:
    job = Job.objects.create(owner=owner, template=template, template_snapshot=template.snapshot().to_json(),
                             cluster=template.cluster, status=JobStatus.COMPLETED, total=len(seconds) + videos)
    Target.objects.bulk_create(
        [Target(job=job, index=i, name=f"{i}.jpg", output_name=f"{i}.jpg", status="done", seconds=s)
         for i, s in enumerate(seconds)]
        + [Target(job=job, index=len(seconds) + k, name=f"v{k}.mp4", output_name=f"v{k}.mp4", status="done",
                  seconds=500.0, frames_done=900, frames_total=900) for k in range(videos)])
    return job


def card_html(client, user, template) -> str:
    client.force_login(user)
    body = client.get(reverse("job-new")).content.decode()
    start = body.index(f'data-name="{template.name}"')
    return body[start:body.index("</label>", start)]


def test_a_card_without_history_gives_no_invented_time(client, owner, fast):
    html = card_html(client, owner, fast)
    # The admin's seconds-per-image is a guess (the same default on every card): no time from it.
    assert "Speed not measured yet" in html and "40 seconds" not in html and "for 100 photos" not in html
    assert "Uses 1 GPU (NVIDIA A100)" in html
    for slurm_word in ("02:00:00", "per task", "batch of", "GPU-hours", "gres", "a100 "):
        assert slurm_word not in html


def test_a_card_with_history_says_what_100_photos_really_took(client, owner, fast):
    finished_job(owner, fast, [1.8] * 15 + [2.0] * 15, videos=3)  # the videos' 500 s are not photos
    assert measured_seconds_per_photo(fast) == (pytest.approx(1.9), 30)
    html = card_html(client, owner, fast)
    assert "about 4 minutes for 100 photos (measured)" in html and "Measured on 30 photos" in html  # 100 x 1.9 s + 30 s


def test_too_little_history_falls_back_to_the_admins_figure(owner, fast):
    finished_job(owner, fast, [9.0] * (HISTORY_MIN_PHOTOS - 1))
    assert measured_seconds_per_photo(fast) == (None, HISTORY_MIN_PHOTOS - 1)
    assert template_estimate(fast)["speed"]["text"] == "Speed not measured yet"


def test_history_is_per_template_and_only_of_ended_jobs(owner, fast, template):
    finished_job(owner, template, [50.0] * 40)  # another template's history
    running = finished_job(owner, fast, [50.0] * 40)
    Job.objects.filter(pk=running.pk).update(status=JobStatus.RUNNING)
    assert measured_seconds_per_photo(fast) == (None, 0)


@pytest.mark.parametrize("seconds, words", [
    (45, "45 seconds"), (600, "10 minutes"), (1200, "20 minutes"), (3600, "1 hour"), (5400, "1 hour 30 minutes"),
    (3 * 86400, "3 days"),
])
def test_times_read_as_people_say_them(seconds, words):
    assert plain_duration(seconds) == words


@pytest.mark.parametrize("count, gpu_type, words", [
    (1, "h200", "1 GPU (NVIDIA H200)"), (2, "nvidia_l40s", "2 GPUs (NVIDIA L40S)"), (1, "tesla-v100", "1 GPU (NVIDIA V100)"),
    (1, "gpu", "1 GPU"), (1, "big_node_type", "1 GPU"), (1, "", "1 GPU"), (0, "", ""),
])
def test_a_gpu_type_shows_only_when_it_reads_as_a_product(count, gpu_type, words):
    assert gpu_words(count, gpu_type) == words
