"""A running video's frames (and its poster) travel from the worker's record to its Target row and
the live page; a fetched video gets a poster where a photo gets its thumbnail."""
import json
from pathlib import Path

from jobs.models import Target
from jobs.shapes import live_target
from jobs.watcher import poll as watcher
from tests.fake_ssh import FakeSSH
from tests.jobs.test_watcher import SAMPLES, CannedSlurm, fake, make_job, record  # noqa: F401 - fixture

RUNNING = {"squeue": (SAMPLES / "squeue_array_running.json").read_text(),
           "sacct": (SAMPLES / "sacct_array_running.json").read_text()}


def video(i, status="running", **fields):
    return {"index": i, "target": f"/in/{i}.mp4", "output": f"{i}.mp4", "status": status, "faces_found": 0,
            "faces_swapped": 0, "seconds": 80.0, "message": "", "frames_done": 1200, "frames_total": 1800, **fields}


def video_job(owner, template):
    job = make_job(owner, template, "29", tasks=4)
    Target.objects.filter(job=job, index=0).update(name="clip.mp4", output_name="0.mp4")
    return job


def running_record(job, rec):
    line = record(job, 0, [rec])
    path, doc = line.rstrip("\n").split("\t")
    return f"{path}\t{json.dumps({**json.loads(doc), 'state': 'running'})}\n"


def test_a_running_videos_frames_reach_its_target_and_the_live_page(fake, owner, template):
    job = video_job(owner, template)
    fake(CannedSlurm(progress=running_record(job, video(0)), **RUNNING))
    watcher.poll_profile(template.cluster)
    target = job.targets.get(index=0)
    assert (target.status, target.frames_done, target.frames_total, target.seconds) == ("running", 1200, 1800, 80.0)
    assert target.seconds_left == 40.0  # 80 s for 1,200 frames: 600 more take about 40 s
    assert live_target(target)["frames"] == {"done": 1200, "total": 1800, "seconds": 80.0}


def test_frames_move_on_from_cycle_to_cycle(fake, owner, template):
    job = video_job(owner, template)
    slurm = CannedSlurm(progress=running_record(job, video(0, frames_done=25, seconds=2.0)), **RUNNING)
    fake(slurm)
    watcher.poll_profile(template.cluster)
    slurm.answers["find"] = running_record(job, video(0, frames_done=900, seconds=60.0))
    watcher.poll_profile(template.cluster)
    assert job.targets.get(index=0).frames_done == 900


def test_an_odd_frame_count_in_a_record_never_stops_the_watcher(fake, owner, template):
    job = video_job(owner, template)
    fake(CannedSlurm(progress=running_record(job, video(0, frames_done=-3, frames_total="many")), **RUNNING))
    watcher.poll_profile(template.cluster)
    target = job.targets.get(index=0)
    assert (target.frames_done, target.frames_total, target.seconds_left) == (None, None, None)


def test_a_photo_has_no_frames(fake, owner, template):
    job = make_job(owner, template, "29", tasks=4)
    photo = {**video(1), "target": "/in/1.jpg", "output": "1.jpg", "frames_done": None, "frames_total": None}
    fake(CannedSlurm(progress=running_record(job, photo), **RUNNING))
    watcher.poll_profile(template.cluster)
    assert (job.targets.get(index=1).frames_done, job.targets.get(index=1).frames_total) == (None, None)
    assert live_target(job.targets.get(index=1))["frames"] is None


def test_only_a_running_video_shows_its_frames(owner, template):
    job = video_job(owner, template)
    target = job.targets.get(index=0)
    for status, frames_done, shown in (("running", 1200, True), ("running", 0, False), ("done", 1800, False),
                                       ("failed", 500, False)):
        target.status, target.frames_done, target.frames_total = status, frames_done, 1800
        assert (live_target(target)["frames"] is not None) == shown, status


def test_a_fetched_video_gets_a_poster_where_a_photo_gets_its_thumbnail(owner, template, tmp_path, settings):
    import subprocess

    from PIL import Image

    from jobs.watcher.outputs import fetch_output

    settings.MEDIA_ROOT = str(tmp_path / "media")
    clip = tmp_path / "made.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=2",
                    "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", str(clip)], check=True)

    job = video_job(owner, template)
    target = job.targets.get(index=0)
    fetch_output(FakeSSH(serve=clip.read_bytes()), job, job.folder, target)
    target.refresh_from_db()
    assert target.output_file and target.thumbnail_file
    with Image.open(target.thumbnail_file) as poster:
        assert poster.format == "JPEG" and poster.width == 320
    assert live_target(target)["thumb_url"]
    assert (Path(target.thumbnail_file).stat().st_mode & 0o777) == 0o600


# ---- a running video's poster ----

def poster_jpeg() -> bytes:
    """A real small JPEG: what the cluster serves for any file fetched (the worker's poster)."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (320, 180), (200, 30, 30)).save(buf, "JPEG")
    return buf.getvalue()


def test_a_running_videos_poster_is_fetched_once_and_shown_before_it_ends(fake, owner, template, settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    job = video_job(owner, template)
    runner = fake(CannedSlurm(progress=running_record(job, video(0, poster=True)), output=poster_jpeg(), **RUNNING))
    watcher.poll_profile(template.cluster)  # asks; the RQ job runs inline (the `fake` fixture)
    target = job.targets.get(index=0)
    assert target.status == "running" and target.thumbnail_file
    assert runner.fetched == [job.folder.poster("0.mp4")]
    assert target.fetch_asked_at is None  # cleared: the output, once there, is asked for at once
    assert live_target(target)["thumb_url"]
    assert (Path(target.thumbnail_file).stat().st_mode & 0o777) == 0o600
    watcher.poll_profile(template.cluster)
    assert runner.fetched == [job.folder.poster("0.mp4")]  # not again


def test_no_poster_is_asked_for_before_the_worker_wrote_one(fake, owner, template):
    job = video_job(owner, template)
    runner = fake(CannedSlurm(progress=running_record(job, video(0)), output=poster_jpeg(), **RUNNING))
    watcher.poll_profile(template.cluster)
    assert runner.fetched == [] and not job.targets.get(index=0).thumbnail_file


def test_a_poster_outstanding_is_asked_for_again_only_after_a_while():
    from datetime import datetime, timedelta, timezone

    from cluster import SlurmTask
    from jobs.watcher.decide import FETCH_AGAIN_AFTER, FetchPosters, JobRow, SlurmAnswer, TargetRow, TaskRow, decide
    from worker.progress import TaskProgress

    now = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
    record = TaskProgress.from_dict({"job": "j", "task_index": 0, "targets": [video(0, poster=True)]})
    running = SlurmAnswer(queued={0: SlurmTask(job_id="29", task_index=0, state="RUNNING")})

    def asked(fetch_asked_at):
        job = JobRow(id="j", status="running", slurm_job_id="29", submitted_at=now,
                     tasks=(TaskRow(index=0, state="RUNNING"),),
                     targets=(TargetRow(index=0, task_index=0, status="running", fetch_asked_at=fetch_asked_at),))
        return decide(job, running, [record], {}, now).of(FetchPosters)

    assert asked(None) == [FetchPosters((0,))]
    assert asked(now - timedelta(seconds=10)) == []
    assert asked(now - FETCH_AGAIN_AFTER - timedelta(seconds=1)) == [FetchPosters((0,))]
