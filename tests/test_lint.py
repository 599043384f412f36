"""The package, the tests and the docs' scripts pass ``ruff check`` (pinned in setup.cfg's test extra, configured in
pyproject.toml's ``[tool.ruff]``: pyflakes, pycodestyle's errors and warnings, bugbear, pylint's errors): an unused
import, an undefined name, a bare ``except``, a mutable default or a ``raise`` that hides its cause fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["alphazero_hpc", "tests", "docs", "slurm", "setup.py"]


def ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_the_code_passes_ruff_with_the_projects_rules() -> None:
    done = ruff(*PATHS)
    assert done.returncode == 0, f"ruff found problems (python -m ruff check {' '.join(PATHS)}):\n{done.stdout[-8000:]}{done.stderr[-2000:]}"


def test_the_projects_rules_catch_what_they_are_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f(x=[]):\n    try:\n        return y\n    except:\n        raise ValueError\n")
    done = ruff("--config", str(ROOT / "pyproject.toml"), "--output-format", "concise", str(bad), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    found = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("bad.py:")}
    assert {"F401", "F821", "E722", "B006", "B904"} <= found, done.stdout
