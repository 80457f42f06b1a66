"""Do a job's face photos show one person? Several photos of one person make a better face; photos
of different people are blended into a face that is nobody's, silently. So when two or more face
photos are given and any two of them are further apart than dlib's "different person" threshold,
Start refuses until the user removes the strangers or says they are the same person.

Who a photo shows is its descriptor (`worker.facecheck.face_descriptor`), measured when the photo
arrived (`Upload.info["descriptor"]`, jobs.uploads.on_complete) or, for a photo sent with the form
itself, measured here. A photo without a descriptor (the models missing) is not compared.
"""
from __future__ import annotations

from itertools import combinations

from django.utils.translation import gettext as _

from jobs.uploads.on_complete import descriptor_of
from worker.facecheck import SAME_PERSON_MAX_DISTANCE, face_distance

#: the form field (and the API's flag) by which a user says the photos show one person after all
CONFIRM_FIELD = "mixed_faces_ok"


def different_people(descriptors) -> bool:
    """Whether any two of `descriptors` (None: unknown, left out) seem to show different people."""
    known = [d for d in descriptors if d]
    return any(face_distance(a, b) > SAME_PERSON_MAX_DISTANCE for a, b in combinations(known, 2))


def mixed_faces_warning() -> str:
    """What the New job page and a refused Start say, in the reader's language."""
    return _("These face photos seem to show different people; the result would mix their faces. Remove the "
             "ones that are not the person you want, or tick 'they are the same person' to go on.")


def mixed_faces_problems(sources, sent_sources, confirmed: bool) -> list[tuple[str, str]]:
    """Start's check: [("source", the warning)] when the face photos (files sent with the form,
    `sources`, and uploads sent ahead, `sent_sources`) seem to show different people and the user
    has not `confirmed` that they are the same person; else []."""
    if confirmed or len(sources) + len(sent_sources) < 2:
        return []
    descriptors = [u.info.get("descriptor") for u in sent_sources]
    descriptors += [_measured(f) for f in sources]
    return [("source", mixed_faces_warning())] if different_people(descriptors) else []


def _measured(f) -> list[float] | None:
    try:
        return descriptor_of(f)
    except Exception:  # noqa: BLE001 - a photo that cannot be read is refused by its own check
        return None
    finally:
        f.seek(0)
