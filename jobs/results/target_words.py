"""What the worker says about one photo or video, in the reader's language.

The worker (no Django, English in its logs) names each sentence it writes in a target's progress
record with a `code` and its values (`params`: worker.errors.TargetError). Here each code has its
sentence for the catalogue; the watcher stores it in the job's language (jobs.words). A code this
portal does not know, or values that do not fit, leave the worker's own English sentence.
"""
from __future__ import annotations

from django.utils.translation import gettext, gettext_noop

WORDS = {
    "no_face": gettext_noop("no face found; the result is the photo as it was"),
    "no_match": gettext_noop("%(found)s faces found, none like the reference photo; the result is the photo as it was"),
    "no_face_video": gettext_noop("no face found in any frame; the result is the video as it was"),
    "profile_left": gettext_noop("a face in profile was left as is"),
    "damaged": gettext_noop("%(name)s is damaged or cut off; export it again or upload it again"),
    "damaged_video": gettext_noop("%(name)s is cut off or damaged (typical of an interrupted upload or recording); "
                                  "upload the complete file again"),
    "not_an_image": gettext_noop("%(name)s is not a photo the worker can read (JPEG, PNG, WebP, BMP, TIFF)"),
    "not_a_video": gettext_noop("%(name)s is not a video the worker can read; use an MP4, MOV, MKV or WebM file"),
    "empty": gettext_noop("%(name)s is empty (0 bytes); upload the file again"),
    "missing": gettext_noop("%(name)s was not found (moved or deleted since the job started?)"),
    "too_many_pixels": gettext_noop("%(name)s has %(megapixels)s megapixels, over the limit of %(limit)s; "
                                    "scale it down and try again"),
    "out_of_memory": gettext_noop("ran out of memory on this file; try a smaller one or a template with more memory"),
    "held_back": gettext_noop("the result was held back by the content check and deleted; it is not delivered"),
    # a file in the user's own cluster folder: it cannot be uploaded again, only exported again there
    "damaged_in_folder": gettext_noop("%(name)s in %(folder)s is damaged: export it again into the same folder, "
                                      "then choose Retry failed"),
    "stopped_with_task": gettext_noop("stopped before it was finished: its batch hit the time limit or was cancelled"),
    "done_earlier": gettext_noop("already finished by an earlier run; kept as it was"),
}

#: the worker's sentences from before it named them with a code (a job still running on an older
#: worker): the same words, in the reader's language
CODES_OF_ENGLISH = {
    "output already present from an earlier attempt": "done_earlier",
}


#: the worker's codes for a file it could not read because the file itself is damaged
DAMAGED_CODES = ("damaged", "damaged_video")


def target_message(code: str, params, english: str, folder: str = "") -> str:
    """The sentence `code` with `params`, translated; the worker's `english` when it cannot be said.
    `folder`: the job's cluster folder, when its files are read there (a damaged one is exported
    again into it: there is nothing to upload)."""
    if folder and code in DAMAGED_CODES:
        code, params = "damaged_in_folder", {**dict(params or {}), "folder": folder}
    words = WORDS.get(code or CODES_OF_ENGLISH.get(english, ""))
    if words is None:
        return english
    try:
        return gettext(words) % dict(params or {})
    except (KeyError, TypeError, ValueError):
        return english
