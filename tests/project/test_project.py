"""Project-level checks: deployment files, CLI entry points, import rules."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def test_docker_compose_is_valid_against_the_compose_spec() -> None:
    schema_path = SHARED / "compose" / "compose-spec.json"
    if not schema_path.exists():
        pytest.skip("compose spec not available")
    schema = json.loads(schema_path.read_text())
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    jsonschema.validate(doc, schema)
    services = doc["services"]
    assert {"db", "migrate", "web"} <= set(services)
    assert "healthcheck" in services["db"] and "healthcheck" in services["web"]
    assert services["migrate"]["command"] == ["vsr", "db", "upgrade", "--app-role", "vsr_app"]
    deps = services["web"]["depends_on"]
    assert deps["migrate"]["condition"] == "service_completed_successfully"
    assert deps["db"]["condition"] == "service_healthy"
    # The proxy in front: the shipped template, TLS certificates from a volume, 443 and 80.
    proxy, web = services["proxy"], services["web"]
    assert str(proxy["image"]).startswith("nginx")
    # source:target[:ro], where the source may be ${VAR:-default}
    mounts = {}
    for v in proxy["volumes"]:
        source, target = re.fullmatch(r"(\$\{[^}]*\}|[^:]+):([^:]+)(?::ro)?", v).groups()  # type: ignore[union-attr]
        mounts[target] = source.split(":-")[-1].rstrip("}")
    template = mounts["/etc/nginx/templates/default.conf.template"]
    assert (ROOT / template).is_file() and (ROOT / mounts["/srv/vsr/static"]).is_dir()
    assert (ROOT / mounts["/etc/nginx/tls"]).is_dir()
    assert {p.split(":")[-1] for p in proxy["ports"]} == {"443", "80"}
    env = proxy["environment"]
    placeholders = set(re.findall(r"\$\{(VSR_[A-Z_]+)\}", (ROOT / template).read_text()))
    assert placeholders <= set(env), placeholders - set(env)
    assert "web:8000" in env["VSR_UPSTREAM_SERVERS"]
    assert proxy["depends_on"]["web"]["condition"] == "service_healthy"
    # web scales (`--scale web=3`): no fixed name, no host port; it trusts the proxy's address.
    assert "container_name" not in web and "ports" not in web
    assert web["environment"]["TRUSTED_PROXIES"] == proxy["networks"]["default"]["ipv4_address"]
    assert doc["x-app-env"]["BASE_URL"].split(":-")[-1].startswith("https://")
    # PostgreSQL admits the connections the documented `--scale web=3` may open: per server
    # process the general pool and the vote API's lean pool (vsr_core.db), per replica its
    # uvicorn workers; plus room for a dashboard job, migrations and an admin's psql.
    from vsr_core.db import MAX_OVERFLOW, POOL_SIZE
    from vsr_core.settings import Settings

    limit = re.search(
        r"max_connections=\$\{PG_MAX_CONNECTIONS:-(\d+)\}", " ".join(services["db"]["command"])
    )
    assert limit, services["db"].get("command")
    workers = int(web["command"][web["command"].index("--workers") + 1])
    per_process = POOL_SIZE + MAX_OVERFLOW + Settings.model_fields["api_threads"].default
    assert int(limit.group(1)) >= 3 * workers * per_process + 20
    # Every path the Dockerfile copies exists, so `docker compose build` can work.
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for src in line.split()[1:-1]:
                assert (ROOT / src).exists(), f"Dockerfile copies missing {src}"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("VSR_DEBUG", None)
    return subprocess.run(
        [str(VENV_BIN / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


@pytest.mark.parametrize(
    "cmd",
    [
        ["vsr", "--help"],
        ["build-dataset", "--help"],
        ["vsr", "db", "--help"],
        ["vsr", "db", "upgrade", "--help"],
        ["vsr", "sample", "--help"],
        ["vsr", "import-vsr", "--help"],
        ["vsr", "serve", "--help"],
        ["vsr", "match", "--help"],
        ["vsr", "build", "--help"],
        ["vsr", "admin", "create", "--help"],
    ],
)
def test_every_command_answers_help(cmd: list[str]) -> None:
    res = _run(*cmd)
    assert res.returncode == 0, res.stderr
    assert "Usage" in res.stdout


def test_db_upgrade_cli_creates_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    res = _run("vsr", "db", "upgrade", env={"DATABASE_URL": url})
    assert res.returncode == 0, res.stderr
    from sqlalchemy import create_engine, inspect

    assert "imagepair" in inspect(create_engine(url)).get_table_names()


def test_cli_error_is_one_line_without_traceback(tmp_path: Path) -> None:
    # A database URL nobody can open: a readable one-line error, non-zero exit.
    res = _run("vsr", "db", "upgrade", "--database-url", "nosuchdriver://x/y")
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr


def test_heavy_libraries_are_never_imported_at_module_top_level() -> None:
    """DESIGN.md: torch and sentence-transformers load inside functions only, so nothing the
    web server or a command's --help imports pays for them. (Who may import whom:
    tests/project/test_layout.py.)"""
    heavy = {"torch", "sentence_transformers", "transformers"}
    packages = (
        "vsr_core",
        "collection",
        "webapp",
        "matching",
        "migrations",
        "vsr_dataset",
        "vsr_cli",
    )
    for pkg in packages:
        for path in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in tree.body:  # module top level only
                if isinstance(node, ast.Import | ast.ImportFrom):
                    mod = node.module if isinstance(node, ast.ImportFrom) else None
                    tops = {(mod or a.name).split(".")[0] for a in node.names}
                    assert not tops & heavy, f"{path.relative_to(ROOT)} imports {tops & heavy}"
