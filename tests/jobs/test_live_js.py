"""The live pages' script (static/js/live/, native ES modules) and what the server hands it.

The lists and mappings the script shares with the server (task badge colours, final and failed job
statuses, video extensions, the WebSocket's refusal codes) are defined once, in Python, and reach
the script through the page: these tests hold the page to carrying them, the script to keeping
no copy of its own, and both pages to having no inline script (a Content-Security-Policy without
'unsafe-inline' must not stop them).
"""
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.urls import reverse

from jobs.live.consumers import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from jobs.live.view import TASK_GROUP_OF_CLASS
from jobs.models import JobStatus, Task
from jobs.models.job import FINAL_STATUSES
from jobs.web.templatetags.portal import (
    FAILED_JOB_STATUSES,
    TASK_STATE_CLASS_OTHER,
    TASK_STATE_CLASSES,
    job_notice_class,
    task_state_class,
)
from tests.jobs.test_pages_jobs import make_job
from worker.manifest import VIDEO_EXTENSIONS

LIVE_JS = Path(__file__).resolve().parents[2] / "static" / "js" / "live"
MODULES = sorted(LIVE_JS.glob("*.js"))


class _Scripts(HTMLParser):
    """Every <script> of a page (its attributes and its text) and every inline event handler."""

    def __init__(self):
        super().__init__()
        self.scripts: list[dict] = []
        self.handlers: list[str] = []
        self._open: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.handlers += [f"<{tag} {name}>" for name in attrs if name.startswith("on")]
        if tag == "script":
            self._open = {"attrs": attrs, "text": ""}
            self.scripts.append(self._open)

    def handle_data(self, data):
        if self._open is not None:
            self._open["text"] += data

    def handle_endtag(self, tag):
        if tag == "script":
            self._open = None


def _scripts(body: str) -> _Scripts:
    parser = _Scripts()
    parser.feed(body)
    return parser


@pytest.fixture
def job(owner, template):
    job = make_job(owner, template, status=JobStatus.RUNNING, slurm_job_id="4242", total=2, done=1)
    Task.objects.create(job=job, index=0, state="RUNNING", node="gpu-node-1")
    Task.objects.create(job=job, index=1, state="OUT_OF_MEMORY", exit_code=137)
    return job


@pytest.fixture
def pages(client, owner, job):
    client.force_login(owner)
    return {"job": client.get(reverse("job-detail", args=[job.id])).content.decode(),
            "list": client.get(reverse("job-list")).content.decode()}


def test_the_task_state_class_filter_reads_the_one_mapping():
    for state, colour in TASK_STATE_CLASSES.items():
        assert task_state_class(state) == colour and task_state_class(state.lower()) == colour
    for state in ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "", None):
        assert task_state_class(state) == TASK_STATE_CLASS_OTHER == "bad"
    assert task_state_class("COMPLETED") == "ok" and task_state_class("PENDING") == "waiting"


def test_the_job_page_hands_the_script_the_task_badge_colours(pages):
    blocks = [s for s in _scripts(pages["job"]).scripts if s["attrs"].get("id") == "task-state-classes"]
    assert len(blocks) == 1 and blocks[0]["attrs"].get("type") == "application/json"
    data = json.loads(blocks[0]["text"])
    assert data == {"states": TASK_STATE_CLASSES, "other": TASK_STATE_CLASS_OTHER, "groups": TASK_GROUP_OF_CLASS}
    # the server's own rows use the same colours
    # plain words in the badge, Slurm's word after it
    assert 'class="badge task-running">running</span> <span class="mono task-code"' in pages["job"]
    assert 'class="badge task-bad">failed</span> <span class="mono task-code"' in pages["job"]
    assert '>RUNNING</span>' in pages["job"] and '>OUT_OF_MEMORY</span>' in pages["job"]


def test_the_live_pages_hand_the_script_the_servers_lists(pages):
    final = " ".join(FINAL_STATUSES)
    codes = f'data-close-unauthenticated="{CLOSE_UNAUTHENTICATED}" data-close-not-found="{CLOSE_NOT_FOUND}"'
    for body in pages.values():
        assert f'data-final-statuses="{final}"' in body and codes in body
    assert f'data-failed-statuses="{" ".join(FAILED_JOB_STATUSES)}"' in pages["job"]
    assert f'data-video-extensions="{" ".join(VIDEO_EXTENSIONS)}"' in pages["job"]


def test_the_job_error_notice_follows_the_failed_statuses():
    assert {s for s in JobStatus.values if job_notice_class(s) == "notice-bad"} == set(FAILED_JOB_STATUSES)
    assert job_notice_class(JobStatus.RUNNING) == "notice-info"


@pytest.mark.parametrize("page", ["job", "list"])
def test_the_live_pages_have_no_inline_script(pages, page):
    found = _scripts(pages[page])
    assert not found.handlers, found.handlers
    for script in found.scripts:
        attrs = script["attrs"]
        if "src" in attrs:
            assert not script["text"].strip(), attrs
        else:
            assert attrs.get("type") == "application/json", script  # data: the browser never runs it
    entry = [s["attrs"] for s in found.scripts if "src" in s["attrs"]]
    assert entry == [{"type": "module", "src": "/static/js/live/main.js"}]


def test_the_live_script_keeps_no_copy_of_the_servers_lists():
    assert MODULES and not (LIVE_JS.parent / "live.js").exists()
    quoted = [*TASK_STATE_CLASSES, *JobStatus.values, *VIDEO_EXTENSIONS]
    for module in MODULES:
        source = module.read_text()
        copies = [v for v in quoted if f'"{v}"' in source or f"'{v}'" in source]
        assert not copies, f"{module.name} repeats {copies}: read them from the page (server_data.js)"
        assert str(CLOSE_UNAUTHENTICATED) not in source and str(CLOSE_NOT_FOUND) not in source, module.name


def test_the_live_modules_are_small_and_import_only_each_other():
    imports = re.compile(r"""^\s*(?:import|export)\b[^;]*?\bfrom\s+["']([^"']+)["']""", re.MULTILINE)
    for module in MODULES:
        source = module.read_text()
        assert len(source.splitlines()) < 250, module.name
        for target in imports.findall(source):
            assert target.startswith("./") and (LIVE_JS / target).is_file(), (module.name, target)
    assert (LIVE_JS / "main.js") in MODULES
