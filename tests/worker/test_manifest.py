"""The manifest is validated on load with errors that say what to fix."""
import json

import pytest

from worker.errors import ManifestError
from worker.manifest import Manifest, make_chunks


def write(tmp_path, data):
    p = tmp_path / "manifest.json"
    p.write_text(json.dumps(data))
    return p


def good(**over):
    data = {
        "version": 1,
        "job": "j1",
        "sources": ["src/face.jpg"],
        "targets": [{"path": "in/a.jpg", "output": "a.jpg"}, {"path": "/abs/b.png"}, {"path": "clip.webm"}],
        "chunks": [[0], [1]],
        "output_dir": "out",
        "engine": {"name": "classic", "face_selector": "one"},
    }
    data.update(over)
    return data


def test_it_loads_and_resolves_relative_paths(tmp_path):
    m = Manifest.load(write(tmp_path, good()))
    assert m.sources == (str(tmp_path / "src/face.jpg"),)
    assert m.targets[0].path == str(tmp_path / "in/a.jpg")
    assert m.targets[1].output == "b.png"  # defaults to the target's file name
    assert m.targets[2].output == "clip.mp4" and m.targets[2].is_video  # H.264 cannot go in WebM
    assert m.output_path(1) == tmp_path / "out" / "outputs" / "b.png"
    assert m.chunk(1) == (1,)
    assert m.engine.face_selector == "one"


def test_it_round_trips_through_json(tmp_path):
    m = Manifest.load(write(tmp_path, good()))
    again = Manifest.from_dict(json.loads(m.dumps()))
    assert again == m


@pytest.mark.parametrize(
    "over, message",
    [
        ({"version": 3}, "version 3 is not supported"),
        ({"target_roots": ["/storage"]}, "unknown manifest field\\(s\\) for version 1: target_roots"),
        ({"version": 2, "target_roots": "/storage"}, "'target_roots' must be a list"),
        ({"version": 2, "target_roots": ["storage"]}, "target_roots\\[0\\] must be an absolute folder path"),
        ({"sources": []}, "at least one source"),
        ({"targets": []}, "at least one target"),
        ({"chunks": [[0, 5]]}, "chunks\\[0\\] names target index 5, but there are 3 targets"),
        ({"chunks": [[]]}, "non-empty list"),
        ({"engine": {"name": "magic"}}, "engine.name must be one of auto, classic, insightface"),
        ({"engine": {"face_selector": "reference"}}, "needs engine.reference_face"),
        ({"engine": {"speed": 3}}, "unknown engine option"),
        ({"targets": [{"path": "a.jpg", "output": "../../etc/passwd"}]}, "must stay inside the outputs folder"),
        ({"targets": [{"path": "a.jpg", "output": "x.jpg"}, {"path": "b.jpg", "output": "x.jpg"}]}, "used by two targets"),
        ({"surprise": 1}, "unknown manifest field"),
    ],
)
def test_it_refuses_bad_manifests_with_a_clear_reason(tmp_path, over, message):
    with pytest.raises(ManifestError, match=message):
        Manifest.load(write(tmp_path, good(**over)))


def test_it_says_when_the_file_is_not_json(tmp_path):
    p = tmp_path / "manifest.json"
    p.write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON \\(line 1"):
        Manifest.load(p)


def test_it_says_when_the_task_index_is_outside_the_chunks(tmp_path):
    m = Manifest.load(write(tmp_path, good()))
    with pytest.raises(ManifestError, match="task index 7 is outside this manifest's 2 chunk"):
        m.chunk(7)


def test_it_splits_targets_into_chunks():
    assert make_chunks(5, 2) == [[0, 1], [2, 3], [4]]
    assert make_chunks(3, 10) == [[0, 1, 2]]


def test_it_writes_version_1_without_target_roots_so_older_workers_still_run_it(tmp_path):
    m = Manifest.load(write(tmp_path, good()))
    assert m.target_roots is None and m.version == 1
    assert json.loads(m.dumps())["version"] == 1 and "target_roots" not in json.loads(m.dumps())


def test_it_reads_and_writes_target_roots_as_version_2(tmp_path):
    m = Manifest.load(write(tmp_path, good(version=2, target_roots=["/srv/storage", "/data"])))
    assert m.target_roots == ("/srv/storage", "/data") and m.version == 2
    data = json.loads(m.dumps())
    assert data["version"] == 2 and data["target_roots"] == ["/srv/storage", "/data"]
    assert Manifest.from_dict(data) == m
    assert Manifest.load(write(tmp_path, good(version=2))).target_roots is None  # optional in version 2
