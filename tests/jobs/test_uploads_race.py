"""Two pieces of one tus upload sent at the same offset at the same time (a client that retried
while its first try was still arriving, two tabs): one wins, the other is refused with 409 and the
server's offset, and the file holds exactly the winner's bytes.

Real concurrency: the first piece is written by `upload_store.append` in a thread, held open in the
middle of its bytes; the second arrives as a PATCH meanwhile, through the view."""
from __future__ import annotations

import threading

import pytest
from django.db import connection

from jobs.models import Upload
from jobs.uploads import store as upload_store

from .test_uploads_tus import TUS, create, patch

pytestmark = pytest.mark.django_db(transaction=True)

PIECE = 200_000
#: long enough for a stuck writer to show as a failure, never reached when the code is right
STUCK_S = 60


class HeldStream:
    """A request body that hands out its first 64 KiB, says so, then waits to be let go."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0
        self.started, self.go = threading.Event(), threading.Event()

    def read(self, n: int = -1) -> bytes:
        if self.at and not self.go.is_set():
            self.started.set()
            assert self.go.wait(STUCK_S), "the test never let the first piece go on"
        n = len(self.data) - self.at if n < 0 else n
        piece = self.data[self.at:self.at + n]
        self.at += len(piece)
        return piece


def test_a_second_piece_at_the_same_offset_never_reaches_the_file(client, owner):
    client.force_login(owner)
    r = create(client, b"\0" * (2 * PIECE), "clip.mp4", "target")
    url = r["Location"]
    upload = Upload.objects.get()
    first, second = b"A" * PIECE, b"B" * PIECE
    held = HeldStream(first)
    outcome: dict = {}

    def send_first():
        try:
            outcome["upload"] = upload_store.append(Upload.objects.get(pk=upload.pk), 0, held, PIECE)
        except Exception as exc:  # noqa: BLE001 - reported by the test below
            outcome["error"] = exc
        finally:
            connection.close()

    writer = threading.Thread(target=send_first)
    writer.start()
    try:
        assert held.started.wait(STUCK_S), outcome
        loser = patch(client, url, 0, second)  # the first piece is half written
    finally:
        held.go.set()
        writer.join(STUCK_S)
    assert loser.status_code == 409, loser.content
    assert loser["Upload-Offset"] == "0"  # where the server was when it refused
    assert "error" not in outcome, outcome
    assert outcome["upload"].offset == PIECE
    assert upload.path.read_bytes()[:PIECE] == first  # nothing of the loser's
    head = client.head(url, **TUS)
    assert head["Upload-Offset"] == str(PIECE)
    # the refused client resumes from the server's count, as tus says
    assert patch(client, url, PIECE, second).status_code == 204
    assert upload.path.read_bytes() == first + second


def test_a_piece_sent_again_after_the_winner_is_refused_with_the_servers_offset(client, owner):
    client.force_login(owner)
    url = create(client, b"\0" * (2 * PIECE), "clip.mp4", "target")["Location"]
    assert patch(client, url, 0, b"A" * PIECE).status_code == 204
    late = patch(client, url, 0, b"B" * PIECE)
    assert late.status_code == 409 and late["Upload-Offset"] == str(PIECE)
    assert Upload.objects.get().path.read_bytes()[:PIECE] == b"A" * PIECE
