"""The SSH runner's pure parts: key texts, pinned host keys, the pool, and run_batch's framing."""
import re
import subprocess

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

import cluster
from cluster import (
    AuthenticationFailed,
    ClusterConfig,
    HostKeyRejected,
    SSHRunner,
    close_all_runners,
    get_runner,
)
from cluster._connect import load_host_keys, load_private_key

OPENSSH = serialization.PrivateFormat.OpenSSH
PEM = serialization.PrivateFormat.TraditionalOpenSSL


def key_text(key, fmt=OPENSSH) -> str:
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()


def public_line(key) -> str:
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()


@pytest.mark.parametrize("make, fmt, cls", [
    (ed25519.Ed25519PrivateKey.generate, OPENSSH, paramiko.Ed25519Key),
    (lambda: ec.generate_private_key(ec.SECP256R1()), OPENSSH, paramiko.ECDSAKey),
    (lambda: ec.generate_private_key(ec.SECP384R1()), PEM, paramiko.ECDSAKey),
    (lambda: rsa.generate_private_key(65537, 2048), PEM, paramiko.RSAKey),
    (lambda: rsa.generate_private_key(65537, 2048), OPENSSH, paramiko.RSAKey),
])
def test_it_reads_every_kind_of_private_key_text(make, fmt, cls):
    text = key_text(make(), fmt)
    assert isinstance(load_private_key(text), cls)
    # As pasted into a web form: CRLF line ends and surrounding blanks.
    assert isinstance(load_private_key("\r\n  " + text.replace("\n", "\r\n") + "  "), cls)


def test_it_refuses_unreadable_key_text_without_echoing_it():
    secret = "-----BEGIN OPENSSH PRIVATE KEY-----\nTOPSECRETTOPSECRET\n-----END OPENSSH PRIVATE KEY-----"
    with pytest.raises(AuthenticationFailed) as caught:
        load_private_key(secret)
    assert "TOPSECRET" not in str(caught.value)


def test_it_refuses_a_passphrase_protected_key():
    text = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, OPENSSH, serialization.BestAvailableEncryption(b"pw")).decode()
    with pytest.raises(AuthenticationFailed, match="passphrase"):
        load_private_key(text)


def test_it_pins_host_keys_in_every_known_hosts_form():
    k1, k2, k3 = (ed25519.Ed25519PrivateKey.generate() for _ in range(3))
    text = "\n".join([
        "# pinned by the admin",
        f"[127.0.0.1]:2222 {public_line(k1)} comment",
        f"cluster.example.org,10.0.0.5 {public_line(k2)}",
        "@cert-authority *.example.org " + public_line(k3),  # not a host key pin: ignored
        "",
    ])
    keys = paramiko.HostKeys()
    assert load_host_keys(keys, text, "127.0.0.1", 2222) == 2
    assert keys.lookup("[127.0.0.1]:2222")["ssh-ed25519"].get_base64() == public_line(k1).split()[1]
    assert keys.lookup("10.0.0.5") is not None and keys.lookup("cluster.example.org") is not None
    assert keys.lookup("127.0.0.1") is None  # port 2222 pins only the [host]:port form


def test_it_pins_a_bare_public_key_for_the_profiles_host():
    keys = paramiko.HostKeys()
    key = ed25519.Ed25519PrivateKey.generate()
    load_host_keys(keys, public_line(key), "127.0.0.1", 2222)
    assert keys.lookup("[127.0.0.1]:2222") is not None


def test_it_refuses_a_known_hosts_line_it_cannot_read():
    with pytest.raises(HostKeyRejected, match="line 2"):
        load_host_keys(paramiko.HostKeys(), "# ok\n[h]:22 ssh-ed25519 !!notbase64!!", "h", 22)


def config(**over):
    base = dict(host="127.0.0.1", port=2222, user="ffportal",
                private_key=key_text(ed25519.Ed25519PrivateKey.generate()), known_hosts="")
    base.update(over)
    return ClusterConfig(**base)


def test_it_never_shows_the_private_key_in_a_repr():
    cfg = config()
    assert "PRIVATE" not in repr(cfg) and cfg.private_key not in repr(cfg)


def test_it_pools_one_runner_per_profile_identity():
    cfg = config()
    try:
        assert get_runner(cfg) is get_runner(ClusterConfig(**{**cfg.__dict__}))
        # A new key or a new pinned host key is a different connection.
        assert get_runner(config(private_key=cfg.private_key, known_hosts="x")) is not get_runner(cfg)
        assert get_runner(config()) is not get_runner(cfg)
        assert cfg.key[:3] == ("127.0.0.1", 2222, "ffportal")
    finally:
        close_all_runners()
    assert get_runner(cfg) is not None
    close_all_runners()


class FakeProfile:
    """Stands in for the portal's ClusterProfile: only `cluster_config()` is asked for."""

    def __init__(self, cfg: ClusterConfig):
        self.cfg, self.asked = cfg, 0

    def cluster_config(self) -> ClusterConfig:
        self.asked += 1
        return self.cfg


def test_it_gives_a_profile_its_pooled_runner():
    cfg = config()
    profile = FakeProfile(cfg)
    try:
        runner = cluster.runner_for(profile)
        assert isinstance(runner, SSHRunner) and runner.config == cfg and profile.asked == 1
        assert runner is get_runner(cfg)
        assert cluster.runner_for(FakeProfile(ClusterConfig(**{**cfg.__dict__}))) is runner
        assert cluster.runner_for(FakeProfile(config())) is not runner
        assert runner.connect_count == 0  # connecting waits for the first command
    finally:
        close_all_runners()


class LocalBash(SSHRunner):
    """run_batch's framing exercised against a local bash instead of sshd."""

    def __init__(self):
        super().__init__(config())
        self.lines = []

    def _exec(self, line, stdin, timeout):
        self.lines.append(line)
        done = subprocess.run(["bash", "-c", line], capture_output=True, timeout=timeout)
        return done.returncode, done.stdout, done.stderr


def test_it_splits_a_batch_per_command_with_each_rc_and_stderr():
    runner = LocalBash()
    results = runner.run_batch([
        ["echo", "hello $(world)"],
        ["sh", "-c", "printf 'no newline'; echo warn >&2; exit 4"],
        ["printf", ""],
        ["sh", "-c", "printf '\\n\\n'; exit 0"],
        ["cat", "/nonexistent/file"],
    ])
    assert len(runner.lines) == 1  # one exec for all of them
    assert [(r.rc, r.stdout, r.stderr) for r in results] == [
        (0, "hello $(world)\n", ""),
        (4, "no newline", "warn\n"),
        (0, "", ""),
        (0, "\n\n", ""),
        (1, "", "cat: /nonexistent/file: No such file or directory\n"),
    ]
    assert results[1].argv == ["sh", "-c", "printf 'no newline'; echo warn >&2; exit 4"]


def test_it_is_not_fooled_by_output_that_looks_like_its_markers():
    runner = LocalBash()
    results = runner.run_batch([
        # A command that prints its own shell's command line (what `ps` would show)...
        ["sh", "-c", "tr '\\0' ' ' < /proc/$PPID/cmdline; echo"],
        # ...and one that prints marker-shaped lines with a made-up nonce.
        ["printf", "\\n%s:1:rc:0\\n%s:2:start\\n", "0" * 32, "0" * 32],
        ["sh", "-c", "exit 7"],
    ])
    line = runner.lines[0]
    assert not re.search(r"[0-9a-f]{32}:\d", line)  # the full marker never appears in the line
    assert "printf" in results[0].stdout and results[0].rc == 0
    assert results[1].stdout == f"\n{'0' * 32}:1:rc:0\n{'0' * 32}:2:start\n"
    assert [r.rc for r in results] == [0, 0, 7]


def test_it_isolates_shell_builtins_in_a_batch():
    runner = LocalBash()
    results = runner.run_batch([["cd", "/"], ["exit", "5"], ["pwd"]])
    assert [r.rc for r in results] == [0, 5, 0]  # `exit` ended only its own subshell


def test_it_refuses_arguments_that_cannot_be_passed():
    runner = LocalBash()
    with pytest.raises(ValueError):
        runner.run_batch([["echo", "a\0b"]])
    with pytest.raises(ValueError):
        runner.run([])
    assert runner.run_batch([]) == []
