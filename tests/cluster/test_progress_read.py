"""The watcher's read of progress records (cluster/progress.py), run for real with this machine's
find and awk over folders laid out as the worker writes them."""
import json
import subprocess

from cluster.progress import parse_progress_dump, progress_argv


def test_it_reads_every_record_of_many_jobs_and_skips_folders_not_made_yet(tmp_path):
    folders = []
    for job in range(3):
        folder = tmp_path / f"job-{job}" / "progress"
        folder.mkdir(parents=True)
        for task in range(2):
            (folder / f"task-{task}.json").write_text(json.dumps({"job": str(job), "task_index": task}))
        (folder / ".task-9.json.1a2b.tmp").write_text("{half a docu")  # a record being written (worker.progress)
        folders.append(str(folder))
    not_started = str(tmp_path / "job-9" / "progress")
    done = subprocess.run(progress_argv([*folders, not_started]), capture_output=True, text=True, timeout=30)
    docs = parse_progress_dump(done.stdout)
    assert sorted(docs) == sorted(folders)
    assert all(sorted(json.loads(d)["task_index"] for d in docs[f]) == [0, 1] for f in folders)
