"""azhpc average: the mean of a run's last networks, its batch norms measured again on the replay window."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from alphazero_hpc.errors import AzhpcError
from alphazero_hpc.net.checkpoint import load_model, read_checkpoint, save_checkpoint
from alphazero_hpc.net.model import build_model
from alphazero_hpc.search.fakes import UniformEvaluator
from alphazero_hpc.selfplay.task import run_selfplay_task
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.runconfig import read_run_config
from alphazero_hpc.train.average import average_generations
from alphazero_hpc.train.data import decode, replay_window
from alphazero_hpc.store.shards import read_shard

from .conftest import TINY, run_cli

DATA = ["selfplay.games_per_generation=8", "selfplay.games_per_shard=2", "selfplay.max_plies=40", "mcts.simulations=8"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Generation 0's and 2's games (a uniform evaluator plays them), networks 1-3 from three seeds."""
    root = tmp_path_factory.mktemp("avg") / "run"
    for generation in (0, 2):
        run_selfplay_task(root, generation, 0, 1, TINY, DATA, evaluator=UniformEvaluator(generation + 1))
    paths = RunPaths(root)
    cfg = read_run_config(paths)
    for generation in (1, 2, 3):
        save_checkpoint(paths.model(generation), build_model(cfg.model, seed=generation), generation)
    return paths


def window_planes(paths: RunPaths, generation: int) -> torch.Tensor:
    """Every position of the window that generation ``generation`` trained on, encoded."""
    cfg = read_run_config(paths)
    parts = []
    for ref in replay_window(paths, generation - 1, cfg.train.window_generations):
        data = read_shard(Path(ref.path))[0]
        parts.append(decode(data, np.arange(len(data)), attacks=cfg.model.attack_sets)["planes"])
    return torch.from_numpy(np.concatenate(parts))


def test_the_average_holds_the_mean_weights_and_batch_norms_measured_on_the_window(run, tmp_path):
    done = average_generations(run.root, 2, 2, tmp_path / "out", bn_positions=4096)
    assert done.generations == (1, 2)
    cfg = read_run_config(RunPaths(tmp_path / "out"))
    net, payload = load_model(done.path, expect=cfg.model)  # what azhpc evaluate OUT --generation 2 loads
    assert payload["generation"] == 2 and payload["averaged"]["generations"] == [1, 2]
    one, two = (load_model(run.model(g))[0] for g in (1, 2))
    for name, p in net.named_parameters():
        mean = (dict(one.named_parameters())[name] + dict(two.named_parameters())[name]) / 2
        assert torch.allclose(p, mean, atol=1e-6), name
    # The stem's batch norm: its running mean is the mean of the stem convolution's output over the window's
    # positions (the batch-norm pass cycles over all of them, 4096 rows), not the fresh networks' zeros
    conv, bn = net.stem[0], net.stem[1]
    assert isinstance(conv, torch.nn.Conv2d) and isinstance(bn, torch.nn.BatchNorm2d)
    with torch.no_grad():
        out = conv(window_planes(run, 2))
    expected = out.mean(dim=(0, 2, 3))
    assert expected.abs().max() > 0.05
    assert one.state_dict()["stem.1.running_mean"].abs().max() == 0
    assert bn.running_mean is not None and torch.allclose(bn.running_mean, expected, atol=0.02 * float(out.std())), (bn.running_mean, expected)
    # generation 2 played games that no averaged network trained on: both networks are scored on them
    assert set(done.held_out) == {"gen 2", "average"}
    assert all(math.isfinite(v) and v > 0 for pair in done.held_out.values() for v in pair)
    assert done.held_out["gen 2"] != done.held_out["average"]


def test_the_source_run_is_only_read_and_nothing_is_written_over(run, tmp_path):
    before = {p: p.stat().st_mtime_ns for p in run.root.rglob("*") if p.is_file()}
    average_generations(run.root, 3, 2, tmp_path / "out")
    assert {p: p.stat().st_mtime_ns for p in run.root.rglob("*") if p.is_file()} == before
    assert read_checkpoint(RunPaths(tmp_path / "out").model(3))["averaged"]["generations"] == [2, 3]
    with pytest.raises(AzhpcError, match="exists: choose another --out"):
        average_generations(run.root, 3, 2, tmp_path / "out")
    with pytest.raises(AzhpcError, match="is the source run"):
        average_generations(run.root, 3, 2, run.root)


@pytest.mark.parametrize("generation, last, expected", [
    (3, 4, "reaches before generation 1"),
    (4, 2, "no network of generation"),
])
def test_generations_that_do_not_exist_are_one_line_errors(run, tmp_path, generation, last, expected):
    res = run_cli("average", str(run.root), "--generation", str(generation), "--last", str(last), "--out", str(tmp_path / "o"))
    assert res.returncode == 1 and expected in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "o").exists()


def test_a_run_without_its_shards_cannot_be_averaged(run, tmp_path):
    bare = RunPaths(tmp_path / "kept")  # as docs/networks keeps a run: config and networks only
    (bare.root / "models").mkdir(parents=True)
    bare.config.write_text(run.config.read_text())
    for g in (1, 2):
        bare.model(g).write_bytes(run.model(g).read_bytes())
    with pytest.raises(AzhpcError, match="no self-play shards"):
        average_generations(bare.root, 2, 2, tmp_path / "out")
    assert not (tmp_path / "out").exists()
