"""Progress records: atomic, whole documents that the portal can always parse."""
import json
import os

from worker.progress import ProgressWriter, TargetRecord, TaskProgress, atomic_write_text, read_progress_dir


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
