"""Other teams' folders on the node (the manifest's `refused_roots`, docs/teams.md): a target that
really lies in another team's folder, even one inside a target root, is refused by the worker in
the words it uses for a path outside the roots, right before it would be opened, and never read;
a manifest without them is written and run exactly as before."""
import json
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

import worker.runner as runner
from worker.errors import ManifestError
from worker.manifest import EngineOptions, Manifest, Target
from worker.progress import read_progress_dir
from worker.runner import EXIT_OK, EXIT_TARGETS_FAILED, TaskConfig, run_task
from worker.targetfile import LINK_OUTSIDE, OUTSIDE, TargetRefused, allowed_folders, open_target

from .test_runner import Recolour, photo


@pytest.fixture
def storage(tmp_path):
    """One storage root holding a shared folder and two teams' folders: post's, and vfx's, with
    a folder inside post's that is vfx's too (a team's folder inside another's)."""
    root = tmp_path / "storage"
    shared, post, vfx = root / "shared", root / "teams" / "post", root / "teams" / "vfx"
    for folder in (shared, post / "lent-to-vfx", vfx):
        folder.mkdir(parents=True)
    photo(shared / "a.png", 10)
    photo(vfx / "v.png", 20)
    photo(post / "secret.png", 77)
    photo(post / "lent-to-vfx" / "lent.png", 40)
    (shared / "b.png").symlink_to(post / "secret.png")  # the escape: a link into post's folder
    (shared / "c.png").symlink_to(vfx / "v.png")  # into vfx's own folder: fine for vfx
    (shared / "d.png").symlink_to(post / "lent-to-vfx" / "lent.png")  # deeper, vfx's again
    (shared / "day2").symlink_to(post)  # a folder on the way that leads into post's
    return root


def vfx_job(root):
    """What the portal writes for a vfx job: the profile's root and vfx's folders; post's refused."""
    return ([str(root), str(root / "teams" / "vfx"), str(root / "teams" / "post" / "lent-to-vfx")],
            [str(root / "teams" / "post")])


def test_a_link_into_another_teams_folder_is_refused_like_one_outside(storage):
    roots, refused = vfx_job(storage)
    allowed = allowed_folders(roots, refused_roots=refused)
    with pytest.raises(TargetRefused) as no:
        with open_target(storage / "shared" / "b.png", allowed):
            pytest.fail("opened another team's photo")
    assert str(no.value) == LINK_OUTSIDE and LINK_OUTSIDE.startswith("skipped: ")
    with pytest.raises(TargetRefused, match=OUTSIDE.replace("(", r"\(").replace(")", r"\)")):
        with open_target(storage / "shared" / "day2" / "secret.png", allowed):
            pass
    for name in ("a.png", "c.png", "d.png"):  # its own folders, and one of them deeper inside post's
        with open_target(storage / "shared" / name, allowed) as opened:
            assert opened.path.read_bytes()


def test_without_target_roots_the_refused_ones_still_hold(storage):
    _roots, refused = vfx_job(storage)
    with pytest.raises(TargetRefused):
        with open_target(storage / "teams" / "post" / "secret.png", allowed_folders(None, refused_roots=refused)):
            pass


def run(tmp_path, monkeypatch, names, roots, refused=()) -> tuple[int, dict, list[str]]:
    """Task 0 of a manifest of `names` (in storage/shared), run as the node runs it."""
    monkeypatch.setattr(runner, "load_engine", lambda *a, **k: SimpleNamespace(name="fake", device="none"))
    monkeypatch.setattr(runner, "build_swapper", lambda *a, **k: Recolour())
    job = tmp_path / "work" / "teams" / "vfx" / "jobs" / "mine"
    job.mkdir(parents=True)
    shared = tmp_path / "storage" / "shared"
    m = Manifest(job="j", sources=(str(job / "sources" / "0-face.png"),),
                 targets=tuple(Target(str(shared / n), n) for n in names), chunks=(tuple(range(len(names))),),
                 output_dir=str(job / "out"), engine=EngineOptions(name="classic"), target_roots=tuple(roots),
                 refused_roots=tuple(refused))
    m.write(job / "manifest.json")
    code = run_task(TaskConfig.from_env(str(job / "manifest.json"), 0, None, None, env={}))
    [task] = read_progress_dir(m.progress_dir)
    return code, {r.output: r for r in task.targets}, sorted(p.name for p in m.outputs_dir.iterdir())


def test_the_task_skips_the_link_into_another_teams_folder_and_runs_the_rest(storage, tmp_path, monkeypatch):
    roots, refused = vfx_job(storage)
    code, records, outputs = run(tmp_path, monkeypatch, ["a.png", "b.png", "c.png", "d.png"], roots, refused)
    assert code == EXIT_TARGETS_FAILED
    assert (records["b.png"].status, records["b.png"].message) == ("failed", LINK_OUTSIDE)
    assert [records[n].status for n in ("a.png", "c.png", "d.png")] == ["done"] * 3
    assert outputs == ["a.png", "c.png", "d.png"]
    secret = np.asarray(Image.open(storage / "teams" / "post" / "secret.png"))
    for name in outputs:  # nothing of post's photo was read into a result
        assert not np.array_equal(np.asarray(Image.open(tmp_path / "work" / "teams" / "vfx" / "jobs" / "mine" / "out"
                                                       / "outputs" / name)), 255 - secret)


def test_a_manifest_without_refused_roots_runs_as_before(storage, tmp_path, monkeypatch):
    """The same link, no refused roots (a job of before, or of no team where no team has folders):
    it lies inside the target root, so it is read, as it always was."""
    code, records, outputs = run(tmp_path, monkeypatch, ["a.png", "b.png"], [str(storage)])
    assert code == EXIT_OK and outputs == ["a.png", "b.png"]
    assert records["b.png"].status == "done"


def test_refused_roots_are_a_version_2_field_written_only_when_there_are_some(tmp_path):
    base = dict(job="j", sources=("/w/face.png",), targets=(Target("/s/a.png", "a.png"),), chunks=((0,),),
                output_dir="/w/out")
    plain = Manifest(**base, target_roots=("/s",))
    assert plain.refused_roots == () and "refused_roots" not in plain.to_dict()  # as written before
    assert Manifest(**base).version == 1
    with_refused = Manifest(**base, target_roots=("/s",), refused_roots=("/s/teams/post",))
    data = json.loads(with_refused.dumps())
    assert data["version"] == 2 and data["refused_roots"] == ["/s/teams/post"]
    assert Manifest.from_dict(data) == with_refused
    # without target roots too: version 2, so a worker that knows only version 1 refuses it unchecked
    assert Manifest(**base, refused_roots=("/s/teams/post",)).version == 2
    older = {**Manifest(**base).to_dict(), "refused_roots": ["/s/teams/post"]}  # version 1 with the field
    with pytest.raises(ManifestError, match="unknown manifest field"):
        Manifest.from_dict(older)
    with pytest.raises(ManifestError, match=r"refused_roots\[0\] must be an absolute folder path"):
        Manifest.from_dict({**data, "refused_roots": ["teams/post"]})
    assert Manifest.from_dict({**data, "refused_roots": []}).refused_roots == ()
