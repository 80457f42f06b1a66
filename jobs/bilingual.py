"""Words an admin writes (a template's name and description, a cluster's name) in the reader's language.

The portal's own sentences go through gettext; what an admin types cannot, so those rows carry an
English text and, optionally, a Simplified Chinese one (`name_zh`, `description_zh`). `in_language`
is the one rule that picks between them, for pages, emails and the live pages alike: the Chinese
text for a Chinese reader when the admin wrote one, else the English, which is always there.
"""
from __future__ import annotations

from django.utils import translation

#: language codes (settings.LANGUAGES, Django's spelling) that read the `*_zh` texts
CHINESE = ("zh-hans", "zh-cn", "zh-sg", "zh")


def is_chinese(language: str | None) -> bool:
    return (language or "").lower().replace("_", "-") in CHINESE


def in_language(english: str, chinese: str, language: str | None = None) -> str:
    """`chinese` for a Chinese reader when it is not blank, else `english`.

    `language` is the reader's (a job's stored language, for an email); None: the active one (the
    request's, or what `translation.override` set)."""
    language = translation.get_language() if language is None else language
    if is_chinese(language) and (chinese or "").strip():
        return chinese.strip()
    return english
