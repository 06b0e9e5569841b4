"""Installing prints no setuptools warning box: the licence is an SPDX string (a TOML table is
deprecated) and the editable install is a plain .pth of this flat layout (the meta-path
finder setuptools would use otherwise prints an "Editable installation" box on every
`pip install -e .`, even with -q)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BUILD = "import sys, setuptools.build_meta as b; print(b.build_editable(sys.argv[1]))"


def test_the_editable_build_warns_about_nothing(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-W", "default", "-c", BUILD, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    output = r.stdout + r.stderr
    assert "deprecated" not in output.lower(), output
    assert "Warning" not in output and "!!" not in output, output
    wheel = tmp_path / r.stdout.strip().splitlines()[-1]
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        pth = [n for n in zf.namelist() if n.endswith(".pth")]
        assert len(pth) == 1 and zf.read(pth[0]).decode().strip() == str(ROOT)
        meta = zf.read("vsr_pipeline-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta
