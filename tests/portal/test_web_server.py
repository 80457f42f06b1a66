"""portal/server.py's pure parts: how many processes, the command line, the WebSocket guard.

The server itself, started as `make up` starts it, is tested from outside in tests/e2e
(test_server_limits.py, test_web_processes.py, test_make_up.py).
"""
from __future__ import annotations

import sys

import pytest

from portal import server


@pytest.mark.parametrize("cores, expected", [(1, 1), (2, 2), (16, server.DEFAULT_PROCESSES_MAX), (None, 1)])
def test_it_runs_one_process_per_core_up_to_the_cap_by_default(monkeypatch, cores, expected):
    monkeypatch.setattr(server.os, "cpu_count", lambda: cores)
    assert server.default_processes({}) == expected
    assert server.default_processes({server.PROCESSES_ENV: " "}) == expected


def test_ffp_web_processes_decides_when_set(monkeypatch):
    monkeypatch.setattr(server.os, "cpu_count", lambda: 2)
    assert server.default_processes({server.PROCESSES_ENV: "5"}) == 5
    assert server.default_processes({server.PROCESSES_ENV: "1"}) == 1


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_it_refuses_a_number_of_processes_that_is_not_one_or_more(value):
    with pytest.raises(ValueError, match=server.PROCESSES_ENV):
        server.default_processes({server.PROCESSES_ENV: value})


def test_the_command_line_names_its_processes_unless_left_to_the_server():
    base = [sys.executable, "-m", "portal.server", "--host", "127.0.0.1", "--port", "8000"]
    assert server.command(8000) == base + ["--processes", "1"]
    assert server.command(8000, processes=2) == base + ["--processes", "2"]
    assert server.command(8000, processes=None) == base


def test_main_refuses_zero_processes_before_serving(monkeypatch, capsys):
    monkeypatch.setattr(server.uvicorn.Server, "run", lambda self, sockets=None: pytest.fail("it served"))
    with pytest.raises(SystemExit) as exited:
        server.main(["--processes", "0"])
    assert exited.value.code == 2 and "--processes" in capsys.readouterr().err


def test_the_config_sets_the_websocket_message_limit_and_the_processes_explicitly():
    config = server.build_config("127.0.0.1", 8000, processes=2)
    # set, not uvicorn's default (16 MiB): a page's messages are tiny, anything larger is refused
    assert config.ws_max_size == server.WS_MAX_MESSAGE_BYTES < 16 * 1024 * 1024
    assert config.ws_max_queue == server.WS_MAX_QUEUED_MESSAGES
    assert config.workers == 2


def test_forwarded_headers_are_believed_only_from_the_named_proxies(settings):
    settings.TRUSTED_PROXIES = []
    config = server.build_config("127.0.0.1", 8000)
    assert config.proxy_headers is False  # unset: not even 127.0.0.1 (any local client could forge them)
    settings.TRUSTED_PROXIES = ["127.0.0.1", "10.0.0.0/24"]
    config = server.build_config("127.0.0.1", 8000)
    assert config.proxy_headers is True and config.forwarded_allow_ips == ["127.0.0.1", "10.0.0.0/24"]


def test_a_trusted_proxy_that_is_not_an_address_stops_the_start_with_what_to_write(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from portal.env import envnetworks

    def trusted_proxies(value: str) -> list[str]:  # what settings.TRUSTED_PROXIES reads
        monkeypatch.setenv("FFP_TRUSTED_PROXIES", value)
        return envnetworks("FFP_TRUSTED_PROXIES", "127.0.0.1 or 10.0.0.0/24")

    assert trusted_proxies(" 127.0.0.1, ::1 ,10.0.0.0/24,") == ["127.0.0.1", "::1", "10.0.0.0/24"]
    assert trusted_proxies("") == []
    with pytest.raises(ImproperlyConfigured, match="FFP_TRUSTED_PROXIES holds 'nginx.example.org'.*not an IP address"):
        trusted_proxies("127.0.0.1,nginx.example.org")
