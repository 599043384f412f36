#!/usr/bin/env bash
# The project's test command (README, .ci/run): sets up .venv if needed and runs the whole suite.
# On a fresh Debian machine with Python 3.11 it installs everything it needs; extra pytest args pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# pip compiles the search's move generator (alphazero_hpc/game/_movegen.c): it needs a C compiler and Python's
# headers, installed here when this machine can (root, apt-get) and they are missing; test_movegen fails without them.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
   ! { command -v cc >/dev/null && "$PY" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; }; then
  if ! { apt-get install -y -q build-essential python3-dev || { apt-get update -q && apt-get install -y -q build-essential python3-dev; }; } >.venv/apt-build.log 2>&1; then
    cat .venv/apt-build.log >&2
    echo "tests/run.sh: apt-get install build-essential python3-dev failed (log above); the compiled move generator will not build" >&2
  fi
fi
# torch==2.13.0 is pinned here only: on these machines it resolves to the local CPU wheel. GPU users
# install their own torch first and then `pip install -e .`.
if ! .venv/bin/pip install --quiet --disable-pip-version-check torch==2.13.0 -e '.[test]' >.venv/install.log 2>&1; then
  cat .venv/install.log >&2
  echo "tests/run.sh: pip install failed (log above)" >&2
  exit 1
fi
# Stockfish and Fairy-Stockfish (Debian's packages) are evaluation opponents and rungs of the calibrated scale;
# their tests need them. Installed here when this machine can (root, apt-get); AZHPC_REQUIRE_STOCKFISH=1 then
# makes a test that cannot find them fail.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  export AZHPC_REQUIRE_STOCKFISH=1
  missing=""
  for engine in stockfish fairy-stockfish; do
    command -v "$engine" >/dev/null || [ -x "/usr/games/$engine" ] || missing="$missing $engine"
  done
  if [ -n "$missing" ]; then
    if ! { apt-get install -y -q $missing || { apt-get update -q && apt-get install -y -q $missing; }; } >.venv/apt-stockfish.log 2>&1; then
      cat .venv/apt-stockfish.log >&2
      echo "tests/run.sh: apt-get install$missing failed (log above); the engine tests will report it" >&2
    fi
  fi
fi
# The SLURM tests run against a real cluster: the project's testbed (two emulated nodes, fake GPUs,
# accounting). Started here when this machine can (root, Debian); AZHPC_TESTBED=0 skips starting it.
# Where it could not be started (not root, not Debian) a SLURM test skips, unless CI=true: then it fails.
if [ "${AZHPC_TESTBED:-1}" != 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  export AZHPC_REQUIRE_SLURM=1  # the cluster must be there now: a SLURM test that cannot reach it fails
  # The tests submit as the testbed's ordinary user, as on a real site (limits apply, nothing runs as root).
  export AZHPC_TEST_SLURM_USER=${AZHPC_TESTBED_USER:-azhpc}
  if ! slurm/testbed/testbed.sh start >.venv/testbed.log 2>&1; then
    cat .venv/testbed.log >&2
    echo "tests/run.sh: the SLURM testbed did not start (log above); the SLURM tests will report it" >&2
  fi
  if ! slurm/testbed/testbed.sh grant .venv/bin/python >>.venv/testbed.log 2>&1; then  # also after a failed start
    cat .venv/testbed.log >&2
    echo "tests/run.sh: the testbed's user cannot run .venv/bin/python (log above); the SLURM tests will report it" >&2
  fi
fi
# AZHPC_TEST_LOAD=1 keeps one core busy for the whole run (tests/conftest.py): the suite must pass on a loaded machine.
# Two pytest-xdist workers: the SLURM tests run in one, one after another (tests/conftest.py), while the other runs
# the tests that need only this machine. The testbed's jobs run on this machine's cores too: a three-worker run kept
# both cores ~98% busy and was no shorter beyond the runs' spread (README; each run ends with every worker's busy seconds).
# AZHPC_TEST_WORKERS=N sets the count; 0 (or -s, --pdb) runs everything in this one process.
workers=${AZHPC_TEST_WORKERS:-2}
for arg in "$@"; do
  case "$arg" in -s|--capture=no|--pdb) workers=0 ;; esac
done
if [ "$workers" != 0 ]; then
  set -- -n "$workers" --dist loadgroup "$@"
fi
exec .venv/bin/python -m pytest "$@"
