#!/usr/bin/env bash
# The project's test command (README, .ci/run): sets up .venv if needed and runs the whole suite.
# On a fresh Debian machine with Python 3.11 it installs everything it needs; extra pytest args pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# torch==2.13.0 is pinned here only: on these machines it resolves to the local CPU wheel. GPU users
# install their own torch first and then `pip install -e .`.
if ! .venv/bin/pip install --quiet --disable-pip-version-check torch==2.13.0 -e '.[test]' >.venv/install.log 2>&1; then
  cat .venv/install.log >&2
  echo "tests/run.sh: pip install failed (log above)" >&2
  exit 1
fi
exec .venv/bin/python -m pytest "$@"
