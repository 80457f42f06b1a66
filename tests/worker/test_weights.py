"""Model files: state checks, the refusal message, the hash cache and downloads from a local server."""
import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.worker.fake_models import build_fake_models
from worker import weights
from worker.download import fetch_models
from worker.errors import ModelError
from worker.weights import DEFAULT_REGISTRY, VERIFIED_CACHE_NAME, ModelSpec, check_models, load_registry, verify_models

DAY_NS = 86_400 * 10**9


@pytest.fixture(autouse=True)
def fresh_process_cache(monkeypatch):
    # Tests reuse paths (tmp_path) across runs; no hash may leak from one test into another.
    monkeypatch.setattr(weights, "_PROCESS_HASHES", {})


def spec_for(name: str, data: bytes, url: str = "http://127.0.0.1:9/none", size=True) -> ModelSpec:
    return ModelSpec(name=name, file=f"{name}.onnx", url=url, sha256=hashlib.sha256(data).hexdigest(),
                     size=len(data) if size else None)


def age(path, days=1):
    """Make a file look untouched for a while (fresh files are never cached: see RACY_MARGIN_NS), by
    the clock the cache compares with (a test run at a chosen clock does not move file timestamps)."""
    os.utime(path, ns=(path.stat().st_atime_ns, time.time_ns() - days * DAY_NS))


def flip_one_byte(path, offset=None):
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if offset is None else offset
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))


# ---- check / verify ---------------------------------------------------------------------------

def test_it_reports_ok_missing_and_corrupt(tmp_path):
    good, bad = b"good model" * 100, b"bad model" * 100
    reg = {"a": spec_for("a", good), "b": spec_for("b", good), "c": spec_for("c", bad)}
    (tmp_path / "a.onnx").write_bytes(good)
    (tmp_path / "c.onnx").write_bytes(bad[:-1] + b"X")  # same size, one byte changed
    states = check_models(tmp_path, ["a", "b", "c"], registry=reg)
    assert [(s.name, s.state) for s in states] == [("a", "ok"), ("b", "missing"), ("c", "corrupt")]
    assert states[1].path == tmp_path / "b.onnx"
    assert "SHA-256" in states[2].detail


def test_it_refuses_a_real_model_file_with_one_byte_changed(tmp_path):
    reg = build_fake_models(tmp_path)
    assert verify_models(tmp_path, list(reg), registry=reg)["inswapper_128"] == tmp_path / "inswapper_128.onnx"
    flip_one_byte(tmp_path / "inswapper_128.onnx")
    with pytest.raises(ModelError) as err:
        verify_models(tmp_path, list(reg), registry=reg)
    msg = str(err.value)
    assert "inswapper_128.onnx is corrupt" in msg
    assert str(tmp_path / "inswapper_128.onnx") in msg
    assert "run `python -m worker models fetch` where the internet is reachable" in msg
    assert f"or copy the file into {tmp_path}" in msg
    assert "det_10g" not in msg and "\n" not in msg  # only the bad file, on one line


def test_it_names_every_missing_file_and_the_folder(tmp_path):
    with pytest.raises(ModelError) as err:
        verify_models(tmp_path / "nowhere", weights.INSIGHTFACE_MODELS)  # the real registry
    msg = str(err.value)
    for name in weights.INSIGHTFACE_MODELS:
        spec = DEFAULT_REGISTRY[name]
        assert f"model file {spec.file} is missing at {tmp_path / 'nowhere' / spec.file}" in msg
    assert "1k3d68" not in msg  # optional: never required
    assert f"copy the file into {tmp_path / 'nowhere'}" in msg


def test_it_catches_a_truncated_file_by_its_size_without_hashing(tmp_path, monkeypatch):
    data = b"x" * 1000
    (tmp_path / "a.onnx").write_bytes(data[:500])
    monkeypatch.setattr(weights, "file_sha256", lambda p: pytest.fail("hashed a file of the wrong size"))
    [state] = check_models(tmp_path, ["a"], registry={"a": spec_for("a", data)})
    assert state.state == "corrupt" and state.detail == "size 500 bytes, expected 1000"


def test_it_refuses_unknown_model_names(tmp_path):
    with pytest.raises(ModelError, match="no model named 'nope'"):
        check_models(tmp_path, ["nope"])


def test_it_uses_the_models_dir_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FACEFUSION_MODELS_DIR", str(tmp_path))
    assert weights.default_models_dir() == tmp_path
    monkeypatch.delenv("FACEFUSION_MODELS_DIR")
    assert weights.default_models_dir() == weights.Path.home() / ".facefusion-portal" / "models"


# ---- the verified-hash cache ------------------------------------------------------------------

def test_it_caches_verified_hashes_next_to_the_models(tmp_path, monkeypatch):
    data = b"model" * 1000
    reg = {"a": spec_for("a", data)}
    path = tmp_path / "a.onnx"
    path.write_bytes(data)
    age(path)
    assert check_models(tmp_path, ["a"], registry=reg)[0].ok
    cached = json.loads((tmp_path / VERIFIED_CACHE_NAME).read_text())["files"]["a.onnx"]
    assert cached["sha256"] == reg["a"].sha256 and cached["size"] == len(data)

    # A new process (empty in-process cache) trusts the file on disk and reads nothing.
    monkeypatch.setattr(weights, "_PROCESS_HASHES", {})
    monkeypatch.setattr(weights, "file_sha256", lambda p: pytest.fail("re-hashed a cached file"))
    assert check_models(tmp_path, ["a"], registry=reg)[0].ok


def test_it_rehashes_a_file_changed_in_place(tmp_path):
    data = b"model" * 1000
    reg = {"a": spec_for("a", data)}
    path = tmp_path / "a.onnx"
    path.write_bytes(data)
    age(path, days=2)
    assert check_models(tmp_path, ["a"], registry=reg)[0].ok
    flip_one_byte(path)  # same size, new mtime
    age(path, days=1)
    assert check_models(tmp_path, ["a"], registry=reg)[0].state == "corrupt"


def test_it_does_not_cache_a_file_written_just_now(tmp_path):
    # Same size and (coarse) mtime could hide a second write within one timestamp tick.
    data = b"model" * 1000
    (tmp_path / "a.onnx").write_bytes(data)
    # "now" by the clock the cache compares with (a test run at a chosen clock does not move the
    # file system's timestamps with it)
    os.utime(tmp_path / "a.onnx", ns=(time.time_ns(), time.time_ns()))
    assert check_models(tmp_path, ["a"], registry={"a": spec_for("a", data)})[0].ok
    assert not (tmp_path / VERIFIED_CACHE_NAME).exists()


def test_it_verifies_in_a_read_only_folder_without_writing_a_cache(tmp_path, monkeypatch):
    data = b"model" * 1000
    (tmp_path / "a.onnx").write_bytes(data)
    age(tmp_path / "a.onnx")
    # Tests run as root here, so permissions cannot make the folder read-only: answer as a ro mount.
    real_access = os.access
    monkeypatch.setattr(weights.os, "access", lambda p, mode: False if mode == os.W_OK else real_access(p, mode))
    reg = {"a": spec_for("a", data)}
    assert verify_models(tmp_path, ["a"], registry=reg) == {"a": tmp_path / "a.onnx"}
    assert os.listdir(tmp_path) == ["a.onnx"]
    # ...and the in-process cache still spares the second check of the same task.
    monkeypatch.setattr(weights, "file_sha256", lambda p: pytest.fail("re-hashed within one process"))
    assert verify_models(tmp_path, ["a"], registry=reg)


# ---- registry files ---------------------------------------------------------------------------

def test_it_loads_a_registry_file_over_the_built_in_one(tmp_path):
    path = tmp_path / "registry.json"
    path.write_text(json.dumps({
        "inswapper_128": {"url": "https://mirror.example/inswapper_128.onnx"},
        "extra": {"file": "extra.onnx", "url": "https://mirror.example/extra.onnx", "sha256": "AB" * 32},
    }))
    reg = load_registry(path)
    assert reg["inswapper_128"].url == "https://mirror.example/inswapper_128.onnx"
    assert reg["inswapper_128"].sha256 == DEFAULT_REGISTRY["inswapper_128"].sha256  # the pin stays
    assert reg["det_10g"] == DEFAULT_REGISTRY["det_10g"]
    assert reg["extra"] == ModelSpec("extra", "extra.onnx", "https://mirror.example/extra.onnx", "ab" * 32, None)


@pytest.mark.parametrize("content, message", [
    ("{not json", "cannot read the model registry"),
    ('{"x": {"file": "x.onnx", "url": "https://a/x"}}', "lacks sha256"),
    ('{"x": {"file": "../x.onnx", "url": "https://a/x", "sha256": "' + "0" * 64 + '"}}', "plain file name"),
    ('{"det_10g": {"sha256": "abc"}}', "malformed sha256"),
    ('{"det_10g": {"md5": "abc"}}', "must be an object with only"),
])
def test_it_refuses_a_bad_registry_file(tmp_path, content, message):
    path = tmp_path / "registry.json"
    path.write_text(content)
    with pytest.raises(ModelError, match=message):
        load_registry(path)


# ---- fetching from a local server -------------------------------------------------------------

class ModelServer:
    """A threaded HTTP server on 127.0.0.1 serving `files`, with Range support and a request log."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        self.cut_after: int | None = None  # close the connection after this many body bytes
        self.stall = threading.Event()  # set: never answer (until the test ends, or 120 s)
        self.stall_ended = threading.Event()  # a stalled request got its connection closed
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                if server.stall.is_set():
                    server.release.wait(120)
                    server.stall_ended.set()
                    return
                data = server.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                start, status = 0, 200
                if rng := self.headers.get("Range"):
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    if start >= len(data):
                        self.send_error(416)
                        return
                    status = 206
                self.send_response(status)
                self.send_header("Content-Length", str(len(data) - start))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                body = data[start:]
                if server.cut_after is not None:
                    body = body[: server.cut_after]
                self.wfile.write(body)

        self.release = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = ModelServer()
    yield s
    s.close()


def served_registry(server, tmp_path):
    """The fake insightface models, served by `server`, to be fetched into an empty folder."""
    built = build_fake_models(tmp_path / "origin")
    reg = {}
    for name, spec in built.items():
        server.files[f"/models/{spec.file}"] = (tmp_path / "origin" / spec.file).read_bytes()
        reg[name] = ModelSpec(name, spec.file, f"{server.url}/models/{spec.file}", spec.sha256, spec.size)
    return reg


def test_it_fetches_missing_models_and_verifies_them(server, tmp_path):
    reg = served_registry(server, tmp_path)
    dest = tmp_path / "models"
    lines = []
    states = fetch_models(dest, list(reg), registry=reg, progress=lines.append)
    assert [s.state for s in states] == ["ok", "ok", "ok"]
    assert sorted(p.name for p in dest.iterdir() if not p.name.startswith(".")) == sorted(s.file for s in reg.values())
    assert verify_models(dest, list(reg), registry=reg)
    assert any("SHA-256 verified" in line for line in lines)
    # A second fetch downloads nothing.
    server.requests.clear()
    fetch_models(dest, list(reg), registry=reg, progress=lines.append)
    assert server.requests == []


def test_it_resumes_a_partial_download_with_a_range_request(server, tmp_path):
    reg = served_registry(server, tmp_path)
    dest = tmp_path / "models"
    dest.mkdir()
    data = server.files["/models/w600k_r50.onnx"]
    (dest / "w600k_r50.onnx.part").write_bytes(data[:300_000])
    [state] = fetch_models(dest, ["w600k_r50"], registry=reg, progress=lambda s: None)
    assert state.ok and (dest / "w600k_r50.onnx").read_bytes() == data
    assert server.requests == [("/models/w600k_r50.onnx", "bytes=300000-")]
    assert not (dest / "w600k_r50.onnx.part").exists()


def test_it_keeps_the_part_when_the_connection_drops_and_resumes_later(server, tmp_path):
    reg = served_registry(server, tmp_path)
    dest = tmp_path / "models"
    server.cut_after = 400_000
    with pytest.raises(ModelError, match="keeps the partial download"):
        fetch_models(dest, ["w600k_r50"], registry=reg, progress=lambda s: None)
    assert (dest / "w600k_r50.onnx.part").stat().st_size == 400_000
    assert not (dest / "w600k_r50.onnx").exists()
    server.cut_after = None
    [state] = fetch_models(dest, ["w600k_r50"], registry=reg, progress=lambda s: None)
    assert state.ok and server.requests[-1] == ("/models/w600k_r50.onnx", "bytes=400000-")


def test_it_refuses_a_download_whose_hash_does_not_match_and_leaves_no_file(server, tmp_path):
    reg = served_registry(server, tmp_path)
    dest = tmp_path / "models"
    good = server.files["/models/det_10g.onnx"]
    server.files["/models/det_10g.onnx"] = good[:-1] + bytes([good[-1] ^ 1])  # same size, tampered
    with pytest.raises(ModelError, match="det_10g.onnx .* does not match .* the download was deleted"):
        fetch_models(dest, ["det_10g"], registry=reg, progress=lambda s: None)
    assert [p.name for p in dest.iterdir()] == []


def test_it_gives_up_on_a_stalled_server_instead_of_hanging(server, tmp_path):
    reg = served_registry(server, tmp_path)
    server.stall.set()
    with pytest.raises(ModelError, match="could not download det_10g.onnx"):
        fetch_models(tmp_path / "models", ["det_10g"], registry=reg, progress=lambda s: None, timeout=0.5)
    assert server.requests and not server.stall_ended.is_set()  # it gave up while the server still stalled


def test_it_reports_an_unreachable_url_plainly(server, tmp_path):
    reg = served_registry(server, tmp_path)
    reg["det_10g"] = ModelSpec("det_10g", "det_10g.onnx", f"{server.url}/gone.onnx", reg["det_10g"].sha256)
    with pytest.raises(ModelError, match=r"could not download det_10g.onnx from http://127\.0\.0\.1:\d+/gone\.onnx"):
        fetch_models(tmp_path / "models", ["det_10g"], registry=reg, progress=lambda s: None)


# ---- `python -m worker models check` ----------------------------------------------------------

def models_check(folder, registry_file):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-m", "worker", "models", "check", "--models-dir", str(folder),
                           "--registry", str(registry_file)], cwd=root, capture_output=True, text=True, timeout=120)


def test_models_check_passes_without_the_optional_head_turn_model_and_says_what_it_is_for(tmp_path):
    reg = build_fake_models(tmp_path / "m")
    registry_file = tmp_path / "registry.json"
    registry_file.write_text(json.dumps({s.name: {"file": s.file, "url": s.url, "sha256": s.sha256, "size": s.size}
                                         for s in reg.values()}))
    run = models_check(tmp_path / "m", registry_file)
    assert run.returncode == 0, run.stdout + run.stderr
    [line] = [ln for ln in run.stdout.splitlines() if "1k3d68" in ln]
    assert "missing" in line and "optional: without it faces in profile are swapped too" in line
    # a head-turn file with the wrong bytes is no optional matter: someone installed the wrong file
    (tmp_path / "m" / "1k3d68.onnx").write_bytes(b"not the model")
    run = models_check(tmp_path / "m", registry_file)
    assert run.returncode == 1 and "1k3d68" in run.stdout and "corrupt" in run.stdout
    assert DEFAULT_REGISTRY["1k3d68"].sha256 == "df5c06b8a0c12e422b2ed8947b8869faa4105387f199c477af038aa01f9a45cc"


def test_models_fetch_gets_the_required_models_when_the_optional_one_cannot_be_fetched(server, tmp_path, capsys):
    from worker import cli

    reg = served_registry(server, tmp_path)  # the server has no 1k3d68.onnx: it answers 404
    entries = {name: {"file": s.file, "url": s.url, "sha256": s.sha256, "size": s.size} for name, s in reg.items()}
    entries["1k3d68"] = {"url": f"{server.url}/models/1k3d68.onnx"}
    registry_file = tmp_path / "registry.json"
    registry_file.write_text(json.dumps(entries))
    dest = tmp_path / "models"
    assert cli.main(["models", "fetch", "--models-dir", str(dest), "--registry", str(registry_file)]) == 0
    out, err = capsys.readouterr()
    assert "warning: the optional model 1k3d68 was not fetched" in err
    assert sorted(p.name for p in dest.glob("*.onnx")) == ["det_10g.onnx", "inswapper_128.onnx", "w600k_r50.onnx"]
    assert "(optional: without it faces in profile are swapped too)" in out
