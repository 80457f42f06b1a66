"""The content check settings in the admin: what to refuse ticked in plain words (both languages),
stored as the labels the checks read; the plug-in path folded away for site engineers."""
from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from jobs.models import AuditEntry, SafetyPolicy

FORM = {"enabled": "on", "check_sources": "on", "check_outputs": "on", "min_score": "0.5", "plugin": "nudenet"}


@pytest.fixture
def admin_client(client, staff):
    client.force_login(staff)
    return client


def page(admin_client, url, language="en") -> str:
    admin_client.cookies["django_language"] = language
    r = admin_client.get(url)
    assert r.status_code == 200
    return html.unescape(r.content.decode())


def boxes(body: str) -> dict[str, tuple[str, bool]]:
    """label code -> (the words next to its checkbox, whether it is ticked)."""
    found = re.findall(r'<label[^>]*><input type="checkbox" name="refuse" value="([A-Z_]+)"[^>]*?( checked)?>\s*'
                       r'([^<]+)</label>', body)
    return {code: (words.strip(), bool(checked)) for code, checked, words in found}


def change_url() -> str:
    return reverse("admin:jobs_safetypolicy_change", args=[1])


@pytest.mark.parametrize("language, heading, bare, face", [
    ("en", "Refuse images that show", "A woman's bare breast", "A man's face"),
    ("zh-hans", "拒绝显示以下内容的图片", "女性裸露的乳房", "男性的脸"),
])
def test_the_labels_to_refuse_are_ticked_in_plain_words(admin_client, language, heading, bare, face):
    SafetyPolicy.objects.create(pk=1, refuse="FEMALE_BREAST_EXPOSED, ANUS_EXPOSED")
    body = page(admin_client, change_url(), language)
    found = boxes(body)
    assert len(found) == 18  # every label the built-in model knows
    assert found["FEMALE_BREAST_EXPOSED"] == (bare, True) and found["ANUS_EXPOSED"][1]
    assert found["FACE_MALE"] == (face, False)
    assert [code for code, (_w, ticked) in found.items() if ticked] == ["FEMALE_BREAST_EXPOSED", "ANUS_EXPOSED"]
    assert heading in body and "FEMALE_BREAST_EXPOSED, ANUS_EXPOSED" not in body


@pytest.mark.parametrize("language, engineers", [("en", "For site engineers"), ("zh-hans", "运维工程师专用")])
def test_the_plug_in_is_folded_away_for_site_engineers(admin_client, language, engineers):
    body = page(admin_client, reverse("admin:jobs_safetypolicy_add"), language)
    fieldsets = re.findall(r"<fieldset.*?</fieldset>", body, re.S)
    (folded,) = [f for f in fieldsets if engineers in f]
    assert "<details><summary>" in folded and 'name="plugin"' in folded and 'name="other_labels"' in folded
    assert all('name="plugin"' not in f for f in fieldsets if f is not folded)
    assert "package.module:callable" in folded


def test_ticked_labels_are_stored_as_the_checks_read_them(admin_client):
    r = admin_client.post(reverse("admin:jobs_safetypolicy_add"),
                          {**FORM, "refuse": ["BUTTOCKS_EXPOSED", "FEMALE_BREAST_EXPOSED"]})
    assert r.status_code == 302, r.content
    policy = SafetyPolicy.current()
    assert policy.refuse == "BUTTOCKS_EXPOSED, FEMALE_BREAST_EXPOSED"  # the model's order, as before
    assert policy.spec().refuse == ("BUTTOCKS_EXPOSED", "FEMALE_BREAST_EXPOSED")
    assert AuditEntry.objects.filter(action="safety_policy.add").exists()


@pytest.mark.parametrize("language, words", [("en", "List at least one label to refuse."),
                                             ("zh-hans", "请至少列出一个要拒绝的标签。")])
def test_nothing_ticked_is_refused(admin_client, language, words):
    admin_client.cookies["django_language"] = language
    r = admin_client.post(reverse("admin:jobs_safetypolicy_add"), FORM)
    assert r.status_code == 200
    assert words in html.unescape(r.content.decode())
    assert not SafetyPolicy.objects.exists()


def test_another_models_labels_are_kept_for_site_engineers(admin_client):
    SafetyPolicy.objects.create(pk=1, plugin="tests.worker.test_safety:Bright", refuse="BRIGHT, TOO_DARK")
    body = page(admin_client, change_url())
    assert not any(ticked for _w, ticked in boxes(body).values())
    assert re.search(r'<input type="text" name="other_labels" value="BRIGHT, TOO_DARK"', body)

    r = admin_client.post(change_url(), {**FORM, "plugin": "tests.worker.test_safety:Bright",
                                         "other_labels": "BRIGHT, TOO_DARK", "min_score": "0.7"})
    assert r.status_code == 302, r.content
    policy = SafetyPolicy.current()
    assert policy.refused_labels == ("BRIGHT", "TOO_DARK") and policy.min_score == 0.7


def test_a_label_the_built_in_model_lacks_is_refused(admin_client):
    r = admin_client.post(reverse("admin:jobs_safetypolicy_add"), {**FORM, "other_labels": "FACE_CAT"})
    assert r.status_code == 200
    assert "The model has no label FACE_CAT" in html.unescape(r.content.decode())
