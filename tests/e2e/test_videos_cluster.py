"""A real video job on the local cluster: its frames advance on the Target while it runs, its poster
shows before it ends, and it ends with its frames counted, the people on screen (not detections x
frames) and a poster of its output."""
from __future__ import annotations

import subprocess

from PIL import Image

from jobs.models import JobStatus, TargetStatus
from tests.e2e.conftest import SAMPLES, run_rq, watch_until
from tests.e2e.test_end_to_end import start

SECONDS, RATE = 8, 10  # 80 frames: the worker reports every 25, so a run shows frames between 0 and 80


def test_a_video_jobs_frames_advance_and_it_ends_with_people_and_a_poster(api, local, folder, redis_queue):
    clip = folder / "group walk.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-loop", "1", "-i", str(SAMPLES / "t1.jpg"), "-t", str(SECONDS),
                    "-r", str(RATE), "-vf", "scale=480:-2,format=yuv420p", "-c:v", "libx264", "-preset", "ultrafast",
                    str(clip)], check=True)
    clip.chmod(0o644)
    job = start(api, folder, name="one video")
    run_rq(redis_queue)
    job.refresh_from_db()
    assert job.slurm_job_id, job.error

    seen = []  # (status, frames_done, frames_total, has a poster) of the video at each watcher cycle

    def look(job):
        t = job.targets.get()
        now = (t.status, t.frames_done, t.frames_total, bool(t.thumbnail_file))
        if not seen or seen[-1] != now:
            seen.append(now)

    job = watch_until(job, {JobStatus.COMPLETED, JobStatus.PARTIALLY_FAILED, JobStatus.FAILED}, on_cycle=look)
    video = job.targets.get()
    assert job.status == JobStatus.COMPLETED, (job.error, video.message, seen)
    frames = SECONDS * RATE
    assert (video.status, video.frames_done, video.frames_total) == (TargetStatus.DONE, frames, frames)
    # the photo's people, once: never summed over 80 frames
    assert 1 <= video.faces_swapped <= video.faces_found < 20, (video.faces_found, video.faces_swapped)
    running = [s for s in seen if s[0] == TargetStatus.RUNNING and s[1]]
    # frames advanced while it ran; the last frame is reported before the video is written out, so
    # "80 of 80" may still be running (seen on a loaded machine: the muxing took a watcher cycle)
    assert running and all(0 < done <= frames and total == frames for _, done, total, _p in running), seen
    assert any(done < frames for _, done, _t, _p in running), seen
    assert any(poster for *_s, poster in running), seen  # the worker's poster, shown before the end
    with Image.open(video.thumbnail_file) as poster:
        assert poster.format == "JPEG" and poster.width == 320
    print("video frames seen by the watcher:", seen)
