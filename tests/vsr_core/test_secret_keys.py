"""A server that other machines reach refuses a SECRET_KEY with too little entropy (32
spaces) and any key written in this repository (the benches' and the tests'): with one of
those, anyone could forge an admin cookie (an issue's red team did, with the bench key).
Checked where the user meets it: `vsr serve --host 0.0.0.0` says why in one line, exit 1."""

from __future__ import annotations

import ast
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

from vsr_core.settings import exposed_key_problem, secret_key_problem

ROOT = Path(__file__).resolve().parents[2]
VSR = str(Path(sys.executable).parent / "vsr")
KEY_NAMES = {"secret_key", "SECRET_KEY", "SECRET"}
SHELL_KEY = re.compile(r"SECRET_KEY[=:]\s*[\"']?([^\s\"'$]{8,})")


def _constant(node: ast.expr) -> str | None:
    """The value of a string made of constants, + and * (``"bench-" + "s" * 40``)."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, (str, int)) else None  # type: ignore[return-value]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _constant(node.left), _constant(node.right)
        if left is None or right is None:
            return None
        try:
            value = left + right if isinstance(node.op, ast.Add) else left * right  # type: ignore[operator]
        except TypeError:
            return None
        return value if isinstance(value, str) else None
    return None


def repository_keys() -> dict[str, str]:
    """Every SECRET_KEY literal in the tracked files: key -> where it was found."""
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found: dict[str, str] = {}
    for name in files:
        path = ROOT / name
        if not path.is_file() or path.suffix not in {".py", ".sh", ".md", ".yml", ".toml", ""}:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".py":
            for node in ast.walk(ast.parse(text)):
                pairs: list[tuple[str | None, ast.expr]] = []
                if isinstance(node, ast.keyword):
                    pairs.append((node.arg, node.value))
                elif isinstance(node, ast.Dict):
                    pairs += [
                        (_constant(k) if k else None, v)
                        for k, v in zip(node.keys, node.values, strict=True)
                    ]
                elif isinstance(node, ast.Assign):
                    pairs += [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
                for key_name, value in pairs:
                    literal = _constant(value) if key_name in KEY_NAMES else None
                    if literal:
                        found.setdefault(literal, f"{name}:{value.lineno}")
        for m in SHELL_KEY.finditer(text):
            found.setdefault(m.group(1), name)
    return found


def test_every_key_in_the_repository_is_refused_off_loopback() -> None:
    keys = repository_keys()
    # The finder sees the benches' keys and the tests' (a finder that finds nothing proves
    # nothing).
    assert "load-bench-" + "s" * 40 in keys and "bench-secret-key-0123456789abcdef" in keys
    assert len(keys) >= 20, keys
    allowed = {k: where for k, where in keys.items() if exposed_key_problem(k) is None}
    assert allowed == {}
    for _ in range(200):  # what the docs tell people to make is accepted
        assert exposed_key_problem(secrets.token_hex(32)) is None
        assert exposed_key_problem(secrets.token_urlsafe(32)) is None
    # On loopback (development, the tests) a long key of any kind still works.
    assert secret_key_problem(" " * 32) is None


def test_serve_off_loopback_refuses_weak_and_repository_keys(sqlite_url: str) -> None:
    cases = {
        " " * 32: "too little entropy",
        "k" * 64: "too little entropy",
        "load-bench-" + "s" * 40: "too little entropy",
        "bench-secret-key-0123456789abcdef": "written in this project's repository",
    }
    for key, reason in cases.items():
        env = {**os.environ, "SECRET_KEY": key}
        r = subprocess.run(
            [VSR, "serve", "--host", "0.0.0.0", "--port", "1", "--database-url", sqlite_url],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 1 and len(lines) == 1, (key, r.stderr)
        assert reason in lines[0] and lines[0].startswith("error: SECRET_KEY"), lines
