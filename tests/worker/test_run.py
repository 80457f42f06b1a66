"""`python -m worker run` and `swap` end to end with the classic engine on photos packages ship."""
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.worker import badfiles
from worker.manifest import EngineOptions, Manifest, Target, make_chunks
from worker.progress import read_progress_dir

ROOT = Path(__file__).resolve().parents[2]
IMAGES = Path(importlib.util.find_spec("insightface").submodule_search_locations[0]) / "data" / "images"


def worker(*args, env=None, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "worker", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def astronaut_rgb():
    from skimage import data

    return np.asarray(data.astronaut())


@pytest.fixture
def job(tmp_path, astronaut_rgb):
    """A folder with a source face and a chunk of good, odd and bad targets."""
    (tmp_path / "in").mkdir()
    shutil.copyfile(IMAGES / "Tom_Hanks_54745.png", tmp_path / "source.png")
    shutil.copyfile(IMAGES / "t1.jpg", tmp_path / "in" / "group.jpg")
    badfiles.photo(astronaut_rgb, tmp_path / "in" / "astronaut.png")
    badfiles.truncated(astronaut_rgb, tmp_path / "in" / "broken.jpg")
    badfiles.photo(np.full((200, 300, 3), 120, np.uint8), tmp_path / "in" / "wall.png")  # no face
    badfiles.cmyk_jpeg(astronaut_rgb, tmp_path / "in" / "cmyk.jpg")
    badfiles.not_an_image(tmp_path / "in" / "notes.jpg")
    names = ["group.jpg", "astronaut.png", "broken.jpg", "wall.png", "cmyk.jpg", "notes.jpg"]
    m = Manifest(job="job-1", sources=("source.png",), targets=tuple(Target(f"in/{n}", n) for n in names),
                 chunks=tuple(tuple(c) for c in make_chunks(len(names), 3)), output_dir="out",
                 engine=EngineOptions(name="classic"))
    m.write(tmp_path / "manifest.json")
    return tmp_path


def test_it_processes_each_chunk_and_records_every_target(job):
    r0 = worker("run", "--manifest", str(job / "manifest.json"), "--task-index", "0")
    env = {"SLURM_ARRAY_TASK_ID": "1", "PATH": "/usr/bin:/bin"}
    r1 = worker("run", "--manifest", str(job / "manifest.json"), env=env)  # index from Slurm's env
    assert r0.returncode == 1, r0.stderr  # broken.jpg failed, the rest of the chunk still ran
    assert r1.returncode == 1, r1.stderr  # notes.jpg failed
    assert "classic" in r0.stderr  # the log says which engine ran

    tasks = {t.task_index: t for t in read_progress_dir(job / "out" / "progress")}
    assert set(tasks) == {0, 1} and all(t.state == "finished" for t in tasks.values())
    recs = {r.output: r for t in tasks.values() for r in t.targets}
    assert recs["group.jpg"].status == "done" and recs["group.jpg"].faces_swapped >= 4
    assert recs["astronaut.png"].status == "done" and recs["astronaut.png"].faces_swapped == 1
    assert recs["broken.jpg"].status == "failed" and "truncated or corrupt" in recs["broken.jpg"].message
    assert recs["wall.png"].status == "no_face" and "unchanged input" in recs["wall.png"].message
    assert recs["cmyk.jpg"].status == "done" and "CMYK" in recs["cmyk.jpg"].message
    assert recs["notes.jpg"].status == "failed" and "not an image" in recs["notes.jpg"].message
    # each sentence named for the portal, which says it in the reader's language
    assert (recs["broken.jpg"].code, recs["broken.jpg"].params) == ("damaged", {"name": "broken.jpg"})
    assert (recs["wall.png"].code, recs["notes.jpg"].code) == ("no_face", "not_an_image")
    assert recs["group.jpg"].code == "profile_left"  # t1.jpg: two faces near profile, left as is

    out = job / "out" / "outputs"
    assert sorted(p.name for p in out.iterdir()) == ["astronaut.png", "cmyk.jpg", "group.jpg", "wall.png"]
    assert (out / "wall.png").read_bytes() == (job / "in" / "wall.png").read_bytes()
    before = np.asarray(Image.open(job / "in" / "group.jpg"), dtype=int)
    after = np.asarray(Image.open(out / "group.jpg"), dtype=int)
    assert after.shape == before.shape and np.abs(after - before).mean() > 0.5


def test_it_skips_targets_finished_by_an_earlier_attempt(job):
    assert worker("run", "--manifest", str(job / "manifest.json"), "--task-index", "0").returncode == 1
    first = (job / "out" / "outputs" / "group.jpg").stat().st_mtime_ns
    r = worker("run", "--manifest", str(job / "manifest.json"), "--task-index", "0")
    [task] = [t for t in read_progress_dir(job / "out" / "progress") if t.task_index == 0]
    statuses = {r.output: r.status for r in task.targets}
    assert statuses == {"group.jpg": "skipped", "astronaut.png": "skipped", "broken.jpg": "failed"}
    assert (job / "out" / "outputs" / "group.jpg").stat().st_mtime_ns == first
    assert r.returncode == 1


def test_it_exits_2_with_a_reason_for_a_bad_manifest_or_index(job, tmp_path):
    r = worker("run", "--manifest", str(job / "manifest.json"), "--task-index", "9")
    assert r.returncode == 2 and "task index 9 is outside this manifest's 2 chunk(s)" in r.stderr
    r = worker("run", "--manifest", str(tmp_path / "nope.json"), "--task-index", "0")
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = worker("run", "--manifest", str(job / "manifest.json"), env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "no task index" in r.stderr


def test_it_marks_the_whole_chunk_failed_when_the_source_has_no_face(job):
    badfiles.photo(np.full((100, 100, 3), 200, np.uint8), job / "source.png")
    r = worker("run", "--manifest", str(job / "manifest.json"), "--task-index", "0")
    assert r.returncode == 2
    [task] = read_progress_dir(job / "out" / "progress")
    assert [t.status for t in task.targets] == ["failed"] * 3
    assert "no face found in the source" in task.targets[0].message


def test_it_refuses_an_insightface_run_without_models_naming_the_file(job, tmp_path):
    data = json.loads((job / "manifest.json").read_text())
    data["engine"]["name"] = "insightface"
    (job / "manifest.json").write_text(json.dumps(data))
    r = worker("run", "--manifest", str(job / "manifest.json"), "--task-index", "0",
               "--models-dir", str(tmp_path / "empty-models"))
    assert r.returncode == 2
    assert "det_10g.onnx" in r.stderr or "w600k_r50.onnx" in r.stderr or "inswapper_128.onnx" in r.stderr


def test_swap_writes_one_output_or_says_why_in_one_line(tmp_path, astronaut_rgb):
    out = tmp_path / "o.jpg"
    r = worker("swap", "--source", str(IMAGES / "Tom_Hanks_54745.png"), "--target", str(IMAGES / "t1.jpg"),
               "--output", str(out), "--engine", "classic", "--face-selector", "one")
    assert r.returncode == 0, r.stderr
    assert "1 of 6 face(s) swapped" in r.stdout and out.exists()

    bad = badfiles.zero_bytes(tmp_path / "z.jpg")
    r = worker("swap", "--source", str(IMAGES / "Tom_Hanks_54745.png"), "--target", str(bad),
               "--output", str(tmp_path / "z-out.jpg"), "--engine", "classic")
    assert r.returncode == 1 and not (tmp_path / "z-out.jpg").exists()
    assert r.stderr.strip().splitlines()[-1].startswith("error: z.jpg is empty")


def test_swap_selects_faces_by_reference(tmp_path):
    # Use one of the group photo's faces as the reference: only that person should be swapped.
    from worker.engines.classic import ClassicEngine
    from worker.imageio import load_image

    group = load_image(IMAGES / "t1.jpg", 50_000_000).bgr
    faces = ClassicEngine().detect(group)
    x1, y1, x2, y2 = (int(v) for v in faces[0].bbox)
    pad = int((x2 - x1) * 0.6)
    crop = group[max(0, y1 - pad): y2 + pad, max(0, x1 - pad): x2 + pad]
    ref = tmp_path / "ref.png"
    badfiles.photo(np.ascontiguousarray(crop[:, :, ::-1]), ref)
    r = worker("swap", "--source", str(IMAGES / "Tom_Hanks_54745.png"), "--target", str(IMAGES / "t1.jpg"),
               "--output", str(tmp_path / "o.png"), "--engine", "classic", "--face-selector", "reference",
               "--reference-face", str(ref))
    assert r.returncode == 0, r.stderr
    assert "1 of 6 face(s) swapped" in r.stdout
