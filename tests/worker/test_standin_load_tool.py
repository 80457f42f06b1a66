"""bench/standin_worker.py, the load run's stand-in worker (a load tool, never a product path), keeps
in step with the real worker: the same manifest, chunks, outputs and progress records, so what
bench/load_run.py measures is the portal reading what a real task writes."""
from __future__ import annotations

from bench import standin_worker
from worker.manifest import EngineOptions, Manifest, Target
from worker.progress import read_progress_dir


def test_each_task_writes_its_chunk_s_outputs_records_and_times(tmp_path):
    photos = tmp_path / "in"
    photos.mkdir()
    for i in range(5):
        (photos / f"p{i}.jpg").write_bytes(f"photo {i}".encode())
    job = tmp_path / "work" / "job"
    job.mkdir(parents=True)
    m = Manifest(job="j", sources=(str(job / "sources" / "0-face.png"),),
                 targets=tuple(Target(str(photos / f"p{i}.jpg"), f"p{i}.jpg") for i in range(5)),
                 chunks=((0, 1, 2), (3, 4)), output_dir=str(job / "out"), engine=EngineOptions(name="classic"))
    m.write(job / "manifest.json")

    for task in (0, 1):
        assert standin_worker.main(["run", "--manifest", str(job / "manifest.json"), "--task-index", str(task)]) == 0

    records = {r.task_index: r for r in read_progress_dir(m.progress_dir)}
    assert {t: r.state for t, r in records.items()} == {0: "finished", 1: "finished"}
    assert [t.index for t in records[0].targets] == [0, 1, 2] and [t.index for t in records[1].targets] == [3, 4]
    assert all(t.status == "done" and t.faces_swapped == 1 for r in records.values() for t in r.targets)
    assert records[0].engine == "stand-in (load tool)"  # never mistaken for a real engine's record
    for i in range(5):
        assert m.output_path(i).read_bytes() == f"photo {i}".encode()
    lines = (job / "standin-times" / "task-1.txt").read_text().splitlines()
    assert lines[0].startswith("start ") and [line.split()[:2] for line in lines[1:]] == [["done", "3"], ["done", "4"]]
    # each "done" is stamped with the record's own updated_at as written: what the portal reads
    assert float(lines[-1].split()[2]) <= records[1].updated_at
