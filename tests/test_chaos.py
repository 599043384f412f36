"""The unattended week in short (issue 30): ``azhpc bench chaos`` kills, fills and corrupts a local run of five
generations, resumes it after each stop, and the run completes with every game once and every network loadable.
The driver's log is the evidence; the run folder lies on a small tmpfs so that the full-disk fault fills a disk
of its own (mounting one needs root, which CI has: without it this test fails, it does not skip)."""

import json
import subprocess

import pytest

from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.tools.chaos import FAULTS, check_run

from .conftest import TINY, run_cli

GENERATIONS, GAMES = 5, 16


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160m", "tmpfs", str(mount)], capture_output=True, text=True)
    assert res.returncode == 0, f"the full-disk fault needs a small filesystem: mount -t tmpfs failed (run as root): {res.stderr}"
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.slow
def test_chaos_every_fault_once_then_every_game_once(small_disk):
    run = small_disk / "run"
    res = run_cli("bench", "chaos", str(run), "--config", str(TINY), "--generations", str(GENERATIONS), "--faults", str(len(FAULTS)),
                  "--mean-gap", "2", "--seed", "3", "--max-fill-mb", "200", "--timeout", "900",
                  "--set", "selfplay.max_plies=40", "--set", "train.loader_workers=0", "--set", "slurm.selfplay_tasks=2",
                  # 4 of a task's 8 games at a time: its first shard is complete while it plays on (the corrupt-shard
                  # fault's target; with all 8 at once both shards were written in the same moment)
                  "--set", "selfplay.games_in_flight=4", "--set", f"selfplay.games_per_generation={GAMES}", timeout=1000)
    log = [json.loads(line) for line in RunPaths(run).chaos_log.read_text().splitlines()]
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    hits = [e for e in log if e["event"] in FAULTS]
    assert sorted({e["event"] for e in hits}) == sorted(FAULTS), log  # each kind hit something
    assert all("skipped" not in e for e in hits), log  # the disk was filled, not skipped
    stops = [e for e in hits if e["event"] in ("selfplay-task", "supervisor", "trainer", "corrupt-shard")]
    assert sum(e["event"] == "resume" for e in log) >= len(stops) - 1, log  # two faults may land in one stop
    check = log[-1]
    assert check["event"] == "check" and check["problems"] == [] and check["games"] == GENERATIONS * GAMES, check
    bad = [e["shard"] for e in hits if e["event"] == "corrupt-shard"]
    assert all((run / f"{s}.bad").exists() and (run / s).exists() for s in bad), (bad, log)  # set aside, then played again

    # the check can fail: a generation short of one shard, and a shard written twice
    paths = RunPaths(run)
    shard = paths.shard(1, 0, paths.complete_shards(1, 0)[0])
    twin = shard.with_name("shard-00090.h5")
    twin.write_bytes(shard.read_bytes())
    twin.with_suffix(".json").write_text(shard.with_suffix(".json").read_text())
    _, problems = check_run(paths, GENERATIONS)
    assert any("repeats" in p for p in problems), problems
    for path in (twin, twin.with_suffix(".json"), shard.with_suffix(".json")):
        path.unlink()
    _, problems = check_run(paths, GENERATIONS)
    assert any(p.startswith("generation 1 has ") and p.endswith(f"of its {GAMES} games") for p in problems), problems
