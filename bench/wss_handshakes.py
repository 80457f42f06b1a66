"""WebSocket handshakes through nginx over TLS (the production shape): how many get no answer, with
websockets' sync client (reads and writes the TLS connection from two threads) against the tests'
one-thread client (tests/e2e/live_socket.py). The reproduction of the "handshake got no answer in
30 s" hang of tests/e2e/test_production_shape.py, on demand.

Needs the production shape up (`make prod-shape`, or `bash scripts/prod-shape.sh up`): it reads its
address, certificate and demo login from $FFP_PROD_DIR/info.json (root only). It logs in once (one
session row) and opens sockets to the job list; it starts no job and writes no file. Rounds alternate
the clients, so both meet the same load; start two busy loops beside it to see more of the race
(`for i in 1 2; do sh -c 'while :; do :; done' & done`).

Usage: .venv/bin/python bench/wss_handshakes.py [--handshakes 500] [--rounds 3] [--timeout 3] [--tls12]
Prints, per client: handshakes, those with no answer within --timeout, and min/median/max seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import ssl
import statistics
import sys
import time
import warnings
from pathlib import Path

import requests
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.e2e.live_socket import LiveSocket

warnings.filterwarnings("ignore", category=DeprecationWarning)


def login(info: dict) -> str:
    s = requests.Session()
    s.trust_env, s.verify = False, info["cert"]
    url = f"{info['https']}/login/"
    s.get(url, timeout=30).raise_for_status()
    r = s.post(url, data={"username": "demo", "password": info["demo_password"], "csrfmiddlewaretoken": s.cookies["csrftoken"]},
               headers={"Origin": info["https"], "Referer": url}, allow_redirects=False, timeout=30)
    if r.status_code != 302:
        raise SystemExit(f"login failed: {r.status_code}")
    return s.cookies["sessionid"]


def one(client: str, url: str, info: dict, ctx, session: str, timeout: float) -> float | None:
    """Seconds to the first message (the snapshot), or None when the handshake got no answer."""
    began = time.monotonic()
    headers = {"Cookie": f"sessionid={session}"}
    try:
        if client == "sync":
            with connect(url, ssl=ctx, origin=info["https"], open_timeout=timeout, additional_headers=headers,
                         proxy=None) as ws:
                ws.recv(timeout=30)
        else:
            with LiveSocket(url, ssl=ctx, origin=info["https"], open_timeout=timeout, headers=headers) as ws:
                ws.recv(timeout=30)
    except TimeoutError:
        return None
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handshakes", type=int, default=500, help="per client and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds a handshake may take")
    parser.add_argument("--tls12", action="store_true", help="TLS 1.2 at most (no TLS 1.3 session tickets)")
    args = parser.parse_args()
    info = json.loads((Path(os.environ.get("FFP_PROD_DIR", "/var/lib/ffportal-prod")) / "info.json").read_text())
    ctx = ssl.create_default_context(cafile=info["cert"])
    if args.tls12:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    url = info["https"].replace("https://", "wss://") + "/ws/jobs/"
    session = login(info)
    results: dict[str, list] = {"sync": [], "live": []}
    for r in range(args.rounds):
        for client in (("sync", "live") if r % 2 == 0 else ("live", "sync")):
            results[client] += [one(client, url, info, ctx, session, args.timeout) for _ in range(args.handshakes)]
    for client, times in results.items():
        ok = sorted(t for t in times if t is not None)
        name = "websockets sync (two threads)" if client == "sync" else "LiveSocket (one thread)"
        print(f"{name:32} TLS {'1.2' if args.tls12 else '1.3'}: {len(times)} handshakes, "
              f"{len(times) - len(ok)} with no answer in {args.timeout:g} s; seconds min/median/max "
              f"{ok[0]:.3f}/{statistics.median(ok):.3f}/{ok[-1]:.3f}")


if __name__ == "__main__":
    main()
