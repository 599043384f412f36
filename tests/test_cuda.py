"""What needs a CUDA GPU: the network's numbers on the GPU, training on it in bf16, and the local pipeline whose
self-play tasks each start fresh and make their own CUDA context while the launcher never makes one.

Deselected by default (marker ``cuda``, like ``long``); on a machine with a GPU: ``python -m pytest -m cuda
tests/test_cuda.py``. Without CUDA they fail, they do not skip: selecting them says a GPU is there.
"""

import subprocess
import sys

import numpy as np
import pytest
import torch

from alphazero_hpc.config import ModelConfig, load_config
from alphazero_hpc.net.checkpoint import load_model
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.progress import read_task_progress
from alphazero_hpc.game.encoding import encode_boards
from alphazero_hpc.net.inference import TorchEvaluator
from alphazero_hpc.net.model import build_model

from .conftest import ROOT, TINY, random_game_boards, run_cli

pytestmark = pytest.mark.cuda


@pytest.fixture(autouse=True)
def need_cuda():
    assert torch.cuda.is_available(), "no CUDA device here: the cuda tests run on a machine with a GPU"


def _relative(a: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(a - ref)) / max(float(np.linalg.norm(ref)), 1e-12)


def test_network_on_cuda_computes_what_the_cpu_computes():
    """The same random network on fresh random positions: float32 on the GPU within TF32's rounding of the CPU's
    float32, bf16 autocast (what self-play uses on CUDA) within bf16's."""
    cfg = ModelConfig(blocks=3, filters=48, attack_planes=True, tactic_planes=True, se_ratio=4)
    model = build_model(cfg, seed=int(np.random.default_rng().integers(1 << 30)))
    for p in model.parameters():  # a trained-looking spread, not the initialiser's near-uniform outputs
        p.data.mul_(1.5)
    boards = random_game_boards(6, seed=int(np.random.default_rng().integers(1 << 30)))[:200]
    planes = encode_boards(boards, cfg.history, attacks=cfg.attack_sets)
    ref_logits, ref_value = TorchEvaluator(model, "cpu", "float32").evaluate(planes)
    for precision, tolerance in (("float32", 5e-3), ("auto", 3e-2)):
        ev = TorchEvaluator(model, "cuda", precision)
        assert ev.autocast == (precision == "auto")
        logits, value = ev.evaluate(planes)
        assert np.isfinite(logits).all() and np.isfinite(value).all()
        assert logits.shape == ref_logits.shape and value.shape == ref_value.shape
        assert _relative(logits, ref_logits) < tolerance, precision
        assert np.abs(value - ref_value).max() < 10 * tolerance, precision
    assert ev.describe().startswith("cuda:0 (")


def test_launcher_counts_gpus_without_a_cuda_context():
    """The launcher asks how many GPUs there are before it starts the tasks: that must not create a CUDA context
    in its process (a fork or a pinned child would inherit or fight over it)."""
    code = ("import torch; from alphazero_hpc.launch.plan import local_devices; g, _ = local_devices(); "
            "print(g, torch.cuda.is_initialized())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    gpus, initialised = out.stdout.split()
    assert int(gpus) >= 1 and initialised == "False"


def test_local_pipeline_on_the_gpu(tmp_path):
    """Two self-play tasks, each a fresh process whose network runs on the GPU (its progress record says so, with
    its own pid), then training on the GPU in bf16: shards and a loadable next network."""
    run = tmp_path / "run"
    res = run_cli("launch", "--cluster", "local", "--generations", "1", "--run-dir", str(run), "--wait",
                  "--config", str(TINY), "--set", "slurm.selfplay_tasks=2", "--set", "selfplay.games_per_generation=8",
                  "--set", "selfplay.games_per_shard=2", "--set", "selfplay.max_plies=40", timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    paths = RunPaths(run)
    records = [read_task_progress(paths.progress(0, t)) for t in range(2)]
    assert all(r is not None and r.status == "done" and r.device.startswith("cuda:0 (") for r in records), records
    assert len({r.pid for r in records if r is not None}) == 2  # (none is None: asserted above)
    load_model(paths.model(1), expect=load_config(run / "config.yaml", []).model)
    logs = "\n".join(p.read_text(errors="replace") for p in run.rglob("*.log"))
    assert "device cuda:0" in logs
