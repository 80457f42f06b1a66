"""The Simplified Chinese catalogue (locale/zh_Hans): complete, compiled, and what a reader sees.

The .po is what translators edit; the .mo next to it is what Django reads. These tests fail when a
string has no translation, when the .mo was not rebuilt after an edit (`msgfmt -o django.mo
django.po`), or when a page a reader opens in 简体中文 still shows the English words.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import translation

PO = Path(__file__).resolve().parents[2] / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"


def _unquote(lines: list[str]) -> str:
    return "".join(ast.literal_eval(line) for line in lines)


def entries() -> list[dict]:
    """The catalogue's entries: msgid, msgid_plural, msgctxt, msgstr (msgstr[0] for plurals), flags."""
    out = []
    for block in PO.read_text(encoding="utf-8").strip().split("\n\n"):
        entry, key, flags = {}, None, ""
        for line in block.splitlines():
            if line.startswith("#,"):
                flags += line
            elif line.startswith("#"):
                continue
            elif line.startswith('"'):
                entry[key].append(line)
            else:
                key, _, rest = line.partition(" ")
                entry[key] = [rest]
        parsed = {k: _unquote(v) for k, v in entry.items()}
        if parsed.get("msgid"):
            out.append({"msgid": parsed["msgid"], "plural": parsed.get("msgid_plural"), "context": parsed.get("msgctxt"),
                        "msgstr": parsed.get("msgstr", parsed.get("msgstr[0]", "")), "flags": flags})
    return out


def test_every_string_has_a_translation():
    found = entries()
    assert len(found) > 400
    untranslated = [e["msgid"] for e in found if not e["msgstr"].strip()]
    fuzzy = [e["msgid"] for e in found if "fuzzy" in e["flags"]]
    assert not untranslated and not fuzzy, (untranslated[:5], fuzzy[:5])


def test_every_translation_keeps_its_placeholders():
    for e in entries():
        # Chinese has one plural form, used for every count: it follows the plural msgid, which may
        # name the count where the singular ("this booking") does not.
        source = e["plural"] or e["msgid"]
        for pattern in (r"%\(\w+\)[sd]", r"\{\w+\}", r"</?\w+"):
            assert sorted(re.findall(pattern, source)) == sorted(re.findall(pattern, e["msgstr"])), e


def test_the_compiled_catalogue_is_the_one_in_the_po():
    with translation.override("zh-hans"):
        stale = [e["msgid"] for e in entries() if e["plural"] is None and e["msgstr"] != (
            translation.pgettext(e["context"], e["msgid"]) if e["context"] else translation.gettext(e["msgid"]))]
    assert not stale, f"{len(stale)} strings differ from django.mo; rebuild it: {stale[:3]}"


@pytest.mark.parametrize("name", ["job-list", "job-new", "usage"])
def test_a_page_in_chinese_reads_in_chinese(client, owner, template, name):
    client.force_login(owner)
    client.cookies["django_language"] = "zh-hans"
    body = client.get(reverse(name)).content.decode()
    assert '<html lang="zh-hans">' in body
    nav = re.search(r"<nav.*?</nav>", body, re.S).group(0)
    assert "任务" in nav and ">Jobs<" not in nav and ">Usage<" not in nav
    assert "Log out" not in body
