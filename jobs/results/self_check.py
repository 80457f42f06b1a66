"""Results that check themselves: the words for a photo the worker's own look flagged
(worker.selfcheck), and what a user can do about it.

The worker compares each swapped face in the result with the face photo and with the face it
replaced; a face still closer to the original "still looks like the person in the photo", and one
that cannot be found again was lost. The result is kept (the user decides); the job page counts
these as "needs a look" (Job.needs_look) and filters them.
"""
from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from worker.selfcheck import FACE_LOST, NOT_TAKEN

#: what to do about any of them: the same advice whatever went wrong
ADVICE = gettext_lazy("Try another face photo: a sharp, front-facing one, with the face well lit.")


def self_check_words(code: str, faces: int, swapped: int) -> str:
    """One sentence for a flagged result ("" when it was not flagged), in the active language.
    `faces`: how many of the `swapped` faces did not take."""
    if code not in (NOT_TAKEN, FACE_LOST):
        return ""
    faces, swapped = max(faces, 1), max(swapped, faces, 1)
    if code == FACE_LOST:
        if swapped == 1:
            return _("No face can be found any more where the face was swapped.")
        return ngettext("%(n)s of the %(of)s swapped faces can no longer be found.",
                        "%(n)s of the %(of)s swapped faces can no longer be found.", faces) % {"n": faces, "of": swapped}
    if swapped == 1:
        return _("The new face did not take: it still looks like the person in the original photo.")
    return ngettext("%(n)s of the %(of)s swapped faces still looks like the person in the original photo.",
                    "%(n)s of the %(of)s swapped faces still look like the people in the original photo.",
                    faces) % {"n": faces, "of": swapped}


def target_self_check_words(target) -> str:
    """`self_check_words` of a Target row."""
    return self_check_words(target.self_check, target.self_check_faces, target.faces_swapped)
