"""Every error a user can cause: one line naming the problem and the fix, nothing half-written."""

import json
import subprocess
from pathlib import Path

import pytest

from alphazero_hpc.search.fakes import UniformEvaluator
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.selfplay.task import run_selfplay_task

from .conftest import need_root, run_cli
from .test_selfplay_task import FAST


def one_line_error(res: subprocess.CompletedProcess) -> str:
    assert res.returncode != 0
    lines = [line for line in res.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    return lines[0]


def test_unknown_config_key_names_it_and_lists_valid_ones(tmp_path):
    line = one_line_error(run_cli("selfplay", str(tmp_path), "--set", "mcts.simulation=3"))
    assert "mcts.simulation" in line and "did you mean mcts.simulations?" in line and "mcts.c_init" in line
    assert not (tmp_path / "config.yaml").exists()


def test_wrong_type_and_out_of_range_values(tmp_path):
    line = one_line_error(run_cli("selfplay", str(tmp_path), "--set", "mcts.simulations=many"))
    assert "mcts.simulations" in line and "expected int" in line
    line = one_line_error(run_cli("selfplay", str(tmp_path), "--set", "selfplay.resign_playthrough=2"))
    assert "selfplay.resign_playthrough" in line and "[0, 1]" in line
    line = one_line_error(run_cli("selfplay", str(tmp_path), "--set", "bogus.x=1"))
    assert "unknown config section 'bogus'" in line


def test_unknown_key_in_a_config_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  blocks: 2\n  filterz: 8\n")
    line = one_line_error(run_cli("selfplay", str(tmp_path / "r"), "--config", str(bad)))
    assert "model.filterz" in line and "model.filters" in line


def test_conflicting_config_for_an_existing_run(tmp_path):
    run_selfplay_task(tmp_path, 0, 0, 6, None, FAST, evaluator=UniformEvaluator(2))
    line = one_line_error(run_cli("selfplay", str(tmp_path), "--set", "mcts.simulations=9"))
    assert "another config" in line and "mcts.simulations: 8 -> 9" in line


def test_missing_checkpoint(tmp_path, tiny_args):
    line = one_line_error(run_cli("selfplay", str(tmp_path), "--generation", "3", *tiny_args))
    assert "gen-0003.pt not found" in line and "train the previous generation" in line


def test_corrupt_checkpoint(tmp_path, tiny_args):
    paths = RunPaths(tmp_path)
    paths.model(1).parent.mkdir(parents=True)
    paths.model(1).write_bytes(b"PK\x03\x04 this is not a checkpoint")
    line = one_line_error(run_cli("selfplay", str(tmp_path), "--generation", "1", *tiny_args))
    assert "corrupt" in line and "gen-0001.pt" in line
    assert not paths.complete_shards(1, 0)


def test_shard_of_another_schema(tmp_path):
    run_selfplay_task(tmp_path, 0, 0, 6, None, FAST, evaluator=UniformEvaluator(2))
    side = RunPaths(tmp_path).sidecar(0, 0, 0)
    meta = json.loads(side.read_text())
    meta["schema_version"] = 99
    side.write_text(json.dumps(meta))
    line = one_line_error(run_cli("selfplay", str(tmp_path), "--num-tasks", "6"))
    assert "schema 99" in line and str(side) in line


def test_missing_config_file(tmp_path):
    line = one_line_error(run_cli("selfplay", str(tmp_path), "--config", "configs/nope.yaml"))
    assert "configs/nope.yaml not found" in line


def _mount_tmpfs(path: Path, options: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)


@pytest.fixture
def tmpfs(tmp_path):
    need_root("mounts a small tmpfs to fill it")
    mounts = []

    def make(name: str, options: str) -> Path:
        p = tmp_path / name
        _mount_tmpfs(p, options)
        mounts.append(p)
        return p

    yield make
    for p in mounts:
        subprocess.run(["umount", "-l", str(p)], check=False)


def test_read_only_run_folder(tmpfs, tiny_args):
    ro = tmpfs("ro", "ro,size=1m")
    line = one_line_error(run_cli("selfplay", str(ro / "run"), *tiny_args))
    assert "cannot write" in line and "writable" in line


def test_full_disk_leaves_complete_shards_and_no_temporaries(tmpfs, tiny_args):
    # Enough room for the config, the tiny network and a shard or two, not for everything.
    disk = tmpfs("full", "size=420k")
    run = disk / "run"
    args = [a.replace("games_per_generation=4", "games_per_generation=40") for a in tiny_args]
    line = one_line_error(run_cli("selfplay", str(run), *args))
    assert "no space left" in line and "rerun continues" in line
    paths = RunPaths(run)
    assert not [p for p in run.rglob("*.tmp")]
    for k in paths.complete_shards(0, 0):  # whatever was completed is intact
        from alphazero_hpc.store.shards import read_shard

        read_shard(paths.shard(0, 0, k))


def test_every_command_has_help():
    import click

    from alphazero_hpc.cli import main

    def walk(cmd, path):
        yield path, cmd
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])

    for path, cmd in walk(main, []):
        assert cmd.help or cmd.short_help, f"azhpc {' '.join(path)} has no help"
        res = run_cli(*path, "--help")
        assert res.returncode == 0 and "Usage" in res.stdout


def test_renamed_options_still_work_with_one_line_saying_so(tmp_path):
    """The option scheme (docs/architecture.md): the run folder is the positional RUN, worker counts say whose
    workers they are. The old spellings keep working for a release, with one line on stderr."""
    old = run_cli("selfplay", "--run-dir", str(tmp_path), "--set", "mcts.simulation=3")
    assert old.stderr.splitlines()[0] == "azhpc: --run-dir is now the positional RUN (--run-dir still works in this release)"
    assert "mcts.simulation" in old.stderr.splitlines()[1] and len(old.stderr.splitlines()) == 2  # and it was used
    doctor = run_cli("doctor", "--run-dir", str(tmp_path))
    assert doctor.returncode == 0 and "--run-dir is now --runs-root" in doctor.stderr and str(tmp_path) in doctor.stdout
    for command in (["train", "--help"], ["bench", "selfplay", "--help"], ["bench", "train", "--help"], ["bench", "pretrain", "--help"]):
        assert "--workers" not in run_cli(*command).stdout  # hidden: only the new names are shown
    missing = run_cli("selfplay")
    assert missing.returncode != 0 and "give the run folder: azhpc selfplay RUN" in missing.stderr
