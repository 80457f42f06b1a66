"""Progress records: atomic, whole documents that the portal can always parse."""
import json
import os

from worker.progress import (
    STOPPED_BY_TASK_END,
    ProgressWriter,
    TargetRecord,
    TaskProgress,
    atomic_write_text,
    read_progress_dir,
)


def test_it_writes_a_whole_document_after_every_change(tmp_path):
    w = ProgressWriter(tmp_path, TaskProgress(job="j", task_index=3))
    w.flush()
    rec = w.start_target(TargetRecord(index=9, target="/in/a.jpg", output="a.jpg"))
    assert json.loads((tmp_path / "task-3.json").read_text())["targets"][0]["status"] == "running"
    rec.status, rec.faces_found, rec.faces_swapped = "done", 2, 2
    w.finish()
    [back] = read_progress_dir(tmp_path)
    assert back.state == "finished" and back.targets[0].status == "done" and back.targets[0].faces_swapped == 2
    assert os.listdir(tmp_path) == ["task-3.json"]  # no temp files left behind


def test_it_reads_records_with_unknown_fields(tmp_path):
    doc = {"version": 1, "job": "j", "task_index": 0, "future": True,
           "targets": [{"index": 0, "target": "t", "output": "o", "status": "done", "new_field": 1}]}
    p = TaskProgress.loads(json.dumps(doc))
    assert p.targets[0].ok


def test_it_leaves_the_old_file_when_a_write_fails(tmp_path):
    path = tmp_path / "task-0.json"
    atomic_write_text(path, "old")

    try:
        atomic_write_text(path, None)  # type: ignore[arg-type]  # write() raises TypeError midway
    except TypeError:
        pass
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["task-0.json"]


def test_it_flags_a_target_stopped_with_its_task_and_keeps_the_flag_through_json(tmp_path):
    w = ProgressWriter(tmp_path, TaskProgress(job="j", task_index=0))
    rec = w.start_target(TargetRecord(index=0, target="/in/v.mp4", output="v.mp4"))
    rec.stop_with_task(seconds=12.5)
    w.finish()
    doc = json.loads((tmp_path / "task-0.json").read_text())["targets"][0]
    assert doc["status"] == "failed" and doc["stopped_by_task_end"] is True
    assert "time limit or was cancelled" in doc["message"]
    [back] = read_progress_dir(tmp_path)
    assert back.targets[0].stopped_by_task_end and not back.targets[0].ok


def test_it_flags_an_older_workers_stopped_record_from_its_message():
    old = {"index": 0, "target": "t", "output": "o", "status": "failed",
           "message": STOPPED_BY_TASK_END + ": the task hit its time limit or was cancelled"}
    own_failure = {"index": 1, "target": "t", "output": "o", "status": "failed", "message": "t is truncated"}
    p = TaskProgress.from_dict({"job": "j", "task_index": 0, "targets": [old, own_failure]})
    assert [t.stopped_by_task_end for t in p.targets] == [True, False]


def test_it_trusts_the_flag_over_the_message_when_both_are_there():
    rec = {"index": 0, "target": "t", "output": "o", "status": "failed", "stopped_by_task_end": False,
           "message": STOPPED_BY_TASK_END + " (a message that happens to start the same way)"}
    [t] = TaskProgress.from_dict({"job": "j", "task_index": 0, "targets": [rec]}).targets
    assert t.stopped_by_task_end is False


def _record_on_disk(path):
    return json.loads(path.read_text())["targets"][0]


def test_it_writes_a_videos_frames_and_time_so_far_at_a_bounded_rate(tmp_path):
    w = ProgressWriter(tmp_path, TaskProgress(job="j", task_index=0))
    rec = w.start_target(TargetRecord(index=0, target="/in/v.mp4", output="v.mp4"))
    path = tmp_path / "task-0.json"
    assert w.report_frames(rec, 25, 1800, seconds=1.0, now=100.0)
    assert not w.report_frames(rec, 50, 1800, seconds=2.0, now=100.5)  # too soon: memory only
    assert _record_on_disk(path)["frames_done"] == 25
    assert w.report_frames(rec, 1200, 1800, seconds=80.0, now=102.5)
    doc = _record_on_disk(path)
    assert (doc["status"], doc["frames_done"], doc["frames_total"], doc["seconds"]) == ("running", 1200, 1800, 80.0)


def test_it_always_writes_a_videos_last_frame(tmp_path):
    w = ProgressWriter(tmp_path, TaskProgress(job="j", task_index=0))
    rec = w.start_target(TargetRecord(index=0, target="/in/v.mp4", output="v.mp4"))
    w.report_frames(rec, 25, 50, seconds=1.0, now=100.0)
    assert w.report_frames(rec, 50, 50, seconds=1.1, now=100.1)
    assert _record_on_disk(tmp_path / "task-0.json")["frames_done"] == 50
