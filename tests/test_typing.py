"""The package and the tests type-check: mypy (pinned in setup.cfg's test extra, configured in its ``[mypy]``
section) finds no error in ``alphazero_hpc``, in ``tests`` or in the calibration scripts of ``docs/calibration`` (every
function, annotated or not; the scripts' figures are checked by tests/test_docs_figures.py, and one had a type error
that nothing ran). Two
benchmark commands once died on a function that another change had moved (the import sat inside the function, so
neither ruff nor any test reached it); mypy named both. This keeps that class of bug, and Optional values used
without a check, out of the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_and_tests_type_check_with_mypy(tmp_path: Path) -> None:
    # a fresh cache: the verdict is the code's, not a stale cache's (about 25 s of one core)
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache"), "alphazero_hpc", "tests",
                           "docs/calibration"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mypy found errors (python -m mypy alphazero_hpc tests docs/calibration):\n{done.stdout[-8000:]}{done.stderr[-2000:]}"
    assert "Success: no issues found" in done.stdout
