"""Real git servers on loopback for the source tests (test infrastructure only).

- ``Upstream``: a bare repository plus a work clone that commits and (force-)pushes to it.
- ``daemon``: the real ``git daemon`` serving a directory on ``git://127.0.0.1:<port>``.
- ``SmartHttp``: the real ``git http-backend`` (CGI) behind the standard library's HTTP
  server, with HTTP Basic auth by token; it can also serve the dumb protocol (plain files)
  and, while a fetch waits on it, look through ``/proc`` for the token in any process's
  argv or environment.
- ``Sshd``: the real OpenSSH server on a loopback port with a throw-away host key and one
  authorized client key (only when ``sshd`` is installed).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import http.server
import ipaddress
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fleet.sandbox.processes import free_port

GIT_ENV = {
    "GIT_AUTHOR_NAME": "fleet tests",
    "GIT_AUTHOR_EMAIL": "tests@fleet.invalid",
    "GIT_COMMITTER_NAME": "fleet tests",
    "GIT_COMMITTER_EMAIL": "tests@fleet.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def git(*args: str, cwd: Path, check: bool = True) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=check, capture_output=True, text=True).stdout.strip()


def wait_listening(port: int, *, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def tls_context(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context for 127.0.0.1 signed by a throw-away CA, and the CA's PEM file."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fleet test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    chain = directory / "server.pem"
    chain.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(chain)
    return context, ca_file


@dataclass
class Upstream:
    """``root/repo.git`` (bare, served) and ``root/work`` (where commits are made)."""

    root: Path

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.bare = self.root / "repo.git"
        self.work = self.root / "work"
        git("init", "--quiet", "--bare", "--initial-branch=main", str(self.bare), cwd=self.root)
        git("init", "--quiet", "--initial-branch=main", str(self.work), cwd=self.root)
        git("remote", "add", "origin", str(self.bare), cwd=self.work)

    @property
    def url(self) -> str:
        return f"file://{self.bare}"

    def commit(self, files: dict[str, str | bytes | None], *, message: str = "change", branch: str = "main") -> str:
        """Write (``None``: delete) files, commit, push ``branch``; returns the commit SHA."""
        for name, content in files.items():
            path = self.work / name
            if content is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        git("add", "--all", cwd=self.work)
        git("commit", "--quiet", "--allow-empty", "-m", message, cwd=self.work)
        git("push", "--quiet", "--force", "origin", f"HEAD:refs/heads/{branch}", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    def rewrite(self, files: dict[str, str | bytes | None], *, message: str = "rewritten") -> str:
        """Replace the last commit (``commit --amend``) and force-push: history the old tip is not part of."""
        for name, content in files.items():
            path = self.work / name
            if content is None:
                path.unlink()
            elif isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        git("add", "--all", cwd=self.work)
        git("commit", "--quiet", "--amend", "-m", message, cwd=self.work)
        git("push", "--quiet", "--force", "origin", "HEAD:refs/heads/main", cwd=self.work)
        git("--git-dir", str(self.bare), "reflog", "expire", "--expire=now", "--all", cwd=self.root)
        git("--git-dir", str(self.bare), "gc", "--quiet", "--prune=now", cwd=self.root)
        return git("rev-parse", "HEAD", cwd=self.work)

    def tag(self, name: str) -> None:
        git("tag", "--force", name, cwd=self.work)
        git("push", "--quiet", "--force", "origin", f"refs/tags/{name}", cwd=self.work)


@contextlib.contextmanager
def daemon(*, base: Path) -> Iterator[int]:
    """``git daemon`` exporting every repository under ``base``; yields its port."""
    port = free_port()
    proc = subprocess.Popen(
        [
            "git",
            "daemon",
            "--export-all",
            "--reuseaddr",
            "--informative-errors",
            "--listen=127.0.0.1",
            f"--port={port}",
            f"--base-path={base}",
            str(base),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_listening(port)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@dataclass
class SmartHttp:
    """``git http-backend`` behind HTTP Basic auth (``user``/``token``); ``dumb`` serves plain files instead."""

    root: Path
    token: str
    user: str = "git"
    dumb: bool = False
    rate: int | None = None
    """Bytes per second for response bodies (``None``: as fast as possible)."""
    leaks: list[str] = field(default_factory=list)
    """Processes seen (during an upload-pack request) with the token in argv or environment."""
    scanned: int = 0
    """Upload-pack requests during which ``/proc`` was scanned."""
    requests: list[str] = field(default_factory=list)
    tls: ssl.SSLContext | None = None
    """Serve HTTPS with this context (``tls_context``)."""

    @contextlib.contextmanager
    def running(self) -> Iterator[int]:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        if self.tls is not None:
            server.socket = self.tls.wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server.server_address[1]
        finally:
            server.shutdown()
            server.server_close()

    def scan_proc(self) -> None:
        needle = self.token.encode()
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            for part in ("cmdline", "environ"):
                with contextlib.suppress(OSError):
                    data = Path(f"/proc/{pid}/{part}").read_bytes()
                    if needle in data:
                        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                        self.leaks.append(f"pid {pid} {part}: {cmd}")
        self.scanned += 1

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        owner = self
        expected = "Basic " + base64.b64encode(f"{self.user}:{self.token}".encode()).decode()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def _serve(self) -> None:
                owner.requests.append(f"{self.command} {self.path}")
                if self.headers.get("Authorization") != expected:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="fleet-tests"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if owner.dumb:
                    self._static()
                    return
                body = self._body()
                if "git-upload-pack" in self.path and self.command == "POST":
                    owner.scan_proc()
                path, _, query = self.path.partition("?")
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "GIT_PROJECT_ROOT": str(owner.root),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "REQUEST_METHOD": self.command,
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "REMOTE_USER": owner.user,
                    "REMOTE_ADDR": "127.0.0.1",
                    "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                    "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                }
                out = subprocess.run(
                    ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
                ).stdout
                head, _, payload = out.partition(b"\r\n\r\n")
                if not _:
                    head, _, payload = out.partition(b"\n\n")
                status = 200
                headers: list[tuple[str, str]] = []
                for line in head.decode("latin-1").splitlines():
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.strip().split()[0])
                    elif name:
                        headers.append((name, value.strip()))
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self._write(payload)

            def _write(self, payload: bytes) -> None:
                if owner.rate is None:
                    self.wfile.write(payload)
                    return
                step = max(1, owner.rate // 20)
                with contextlib.suppress(OSError):
                    for start in range(0, len(payload), step):
                        self.wfile.write(payload[start : start + step])
                        time.sleep(0.05)

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = bytearray()
                    while True:
                        size = int(self.rfile.readline().strip().split(b";")[0], 16)
                        if size == 0:
                            self.rfile.readline()
                            return bytes(chunks)
                        chunks += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _static(self) -> None:
                target = (owner.root / self.path.split("?")[0].lstrip("/")).resolve()
                if not target.is_file() or owner.root.resolve() not in target.parents:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = target.read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self._write(data)

        return Handler


@dataclass
class Sshd:
    """OpenSSH's sshd on a loopback port: ``client_key`` may log in as the current user."""

    root: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def binary() -> str | None:
        found = shutil.which("sshd") or ("/usr/sbin/sshd" if Path("/usr/sbin/sshd").exists() else None)
        return found if found and shutil.which("ssh") and shutil.which("ssh-keygen") else None

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.host_key = self.root / "host_ed25519"
        self.client_key = self.root / "client_ed25519"
        for key in (self.host_key, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        authorized = self.root / "authorized_keys"
        authorized.write_text(self.client_key.with_suffix(".pub").read_text())
        authorized.chmod(0o600)

    def known_hosts(self, *, key: Path | None = None) -> str:
        kind, blob = (key or self.host_key).with_suffix(".pub").read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {blob}\n"

    @contextlib.contextmanager
    def running(self) -> Iterator[int]:
        binary = self.binary()
        assert binary is not None
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        config = self.root / "sshd_config"
        config.write_text(
            f"Port {self.port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {self.host_key}\n"
            f"AuthorizedKeysFile {self.root / 'authorized_keys'}\n"
            f"PidFile {self.root / 'sshd.pid'}\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\n"
            "StrictModes no\n"
            "UsePAM no\n"
        )
        self.proc = subprocess.Popen(
            [binary, "-D", "-e", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=(self.root / "sshd.log").open("wb"),
            start_new_session=True,
        )
        try:
            wait_listening(self.port)
            yield self.port
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=10)
