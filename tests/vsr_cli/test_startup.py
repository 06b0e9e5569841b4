"""Commands start fast: importing the CLI and printing any command's help loads none of the
heavy libraries (they load inside the command that uses them). Timings are in
bench/startup.py; this checks the cause, not the clock."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = [
    "sqlalchemy",
    "sqlmodel",
    "vsr_core.models",
    "pandas",
    "matplotlib",
    "scipy",
    "networkx",
    "crowdkit",
    "sentence_transformers",
    "torch",
    "pycocotools",
    "shapely",
    "PIL",
    "numpy",
    "fastapi",
    "uvicorn",
    "alembic",
    "tqdm",
    "rich",
    "krippendorff",
    "orjson",
    "psycopg",
]

PROBE = """
import json, sys
import typer
from vsr_cli.main import app, build_app
commands = [[], ["sample"], ["import-vsr"], ["serve"], ["match"], ["build"], ["db", "upgrade"],
            ["admin", "create"], ["invite", "create"]]
for args in commands:
    try:
        typer.main.get_command(app)([*args, "--help"], prog_name="vsr", standalone_mode=False)
    except SystemExit:
        pass
try:
    typer.main.get_command(build_app)(["--help"], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def test_help_of_every_command_imports_no_heavy_library() -> None:
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = set(json.loads(r.stdout.splitlines()[-1]))
    assert "Usage: vsr sample" in r.stdout  # the help really was rendered
    assert [m for m in HEAVY if m in loaded] == []
