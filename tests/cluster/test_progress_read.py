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


def test_with_a_time_it_prints_only_the_records_written_after_it_by_the_clusters_clock(tmp_path):
    import os
    import time

    from cluster.progress import clock_argv, parse_clock

    folder = tmp_path / "job" / "progress"
    folder.mkdir(parents=True)
    for task in range(3):
        (folder / f"task-{task}.json").write_text(json.dumps({"task_index": task}))
    old = time.time() - 60
    for task in (0, 2):
        os.utime(folder / f"task-{task}.json", (old, old))
    now = parse_clock(subprocess.run(clock_argv(), capture_output=True, text=True, timeout=30).stdout)
    assert now is not None and abs(now - time.time()) < 5
    done = subprocess.run(progress_argv([str(folder)], newer_than=now - 30), capture_output=True, text=True, timeout=30)
    assert [json.loads(d)["task_index"] for d in parse_progress_dump(done.stdout)[str(folder)]] == [1]
    assert parse_clock("") is None and parse_clock("soon") is None and parse_clock("nan") is None


def test_no_folders_is_a_command_that_reads_nothing():
    # `find` given no folder would search the login folder of the cluster's service user
    assert progress_argv([]) == ["true"] and progress_argv([], newer_than=1.0) == ["true"]
