"""nginx in front of replicas, as shipped in deploy/nginx/: the config rendered into a scratch
folder, a self-signed certificate, and the proxy started unprivileged and stopped again."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "deploy" / "nginx"
STATIC_DIR = ROOT / "webapp" / "static"
# As docker-compose.yml ships them: a replica that cannot be reached 3 times is rested 2 s.
UPSTREAM_OPTIONS = "max_fails=3 fail_timeout=2s"
PLACEHOLDER = re.compile(r"\$\{(VSR_[A-Z_]+)\}")


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )


def render(template: Path, values: dict[str, str]) -> str:
    """Fill ${VSR_*} as envsubst would; a placeholder without a value is an error here."""
    text = template.read_text()
    missing = sorted({m for m in PLACEHOLDER.findall(text) if m not in values})
    if missing:
        raise KeyError(f"{template.name}: no value for {', '.join(missing)}")
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def self_signed(folder: Path, host: str) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            f"/CN={host}",
            "-addext",
            f"subjectAltName=DNS:{host},IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


class Proxy:
    """nginx from ``prefix`` over the given replica ports, TLS on ``https_port``."""

    def __init__(
        self,
        prefix: Path,
        upstream_ports: list[int],
        https_port: int,
        http_port: int,
        host: str = "localhost",
    ) -> None:
        self.prefix, self.https_port, self.http_port = prefix, https_port, http_port
        self.host = host
        self.proc: subprocess.Popen[bytes] | None = None
        for sub in ("tmp", "cache"):
            (prefix / sub).mkdir(parents=True, exist_ok=True)
        cert, key = self_signed(prefix, host)
        servers = " ".join(f"server 127.0.0.1:{p} {UPSTREAM_OPTIONS};" for p in upstream_ports)
        values = {
            "VSR_PREFIX": str(prefix),
            "VSR_MIME_TYPES": "/etc/nginx/mime.types",
            "VSR_UPSTREAM_SERVERS": servers,
            "VSR_PUBLIC_HOST": f"{host}:{https_port}",
            "VSR_SERVER_NAME": host,
            "VSR_HTTP_PORT": str(http_port),
            "VSR_HTTPS_PORT": str(https_port),
            "VSR_TLS_CERT": str(cert),
            "VSR_TLS_KEY": str(key),
            "VSR_STATIC_DIR": str(STATIC_DIR),
            "VSR_CACHE_DIR": str(prefix / "cache"),
            "VSR_ACCESS_LOG": str(prefix / "access.log"),
        }
        (prefix / "vsr.conf").write_text(render(TEMPLATES / "vsr.conf.template", values))
        (prefix / "nginx.conf").write_text(render(TEMPLATES / "nginx.conf.template", values))

    @property
    def base(self) -> str:
        return f"https://{self.host}:{self.https_port}"

    def start(self) -> None:
        binary = nginx_binary()
        assert binary, "nginx is not installed"
        # As root, nginx would hand its workers to `nobody`, who cannot write the scratch
        # folder; keep them as the user who started it (unprivileged runs ignore `user`).
        extra = " user root;" if os.geteuid() == 0 else ""
        log = (self.prefix / "nginx.out").open("ab")
        self.proc = subprocess.Popen(
            [
                binary,
                "-p",
                str(self.prefix),
                "-c",
                str(self.prefix / "nginx.conf"),
                "-g",
                "daemon off;" + extra,
                "-e",
                str(self.prefix / "error.log"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                httpx.get(self.base + "/healthz", verify=False, timeout=1)
                return
            except httpx.HTTPError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        raise RuntimeError("nginx did not start: " + self.errors())

    def errors(self) -> str:
        return "".join(
            (self.prefix / n).read_text()
            for n in ("nginx.out", "error.log")
            if (self.prefix / n).exists()
        )[-3000:]

    def upstreams_seen(self) -> list[str]:
        """The replica address of each request in the access log (``-`` when none)."""
        text = (self.prefix / "access.log").read_text()
        return re.findall(r"upstream=(\S+)", text)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
