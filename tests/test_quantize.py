"""``mcts.precision: int8`` (net/quantize.py): the network quantized for CPU inference agrees with its float32 self on
a trained network, is the same int8 network in every process, and is refused off the CPU in one line."""

from pathlib import Path

import numpy as np
import pytest

from alphazero_hpc.errors import AzhpcError
from alphazero_hpc.game.encoding import MOVE_PLANES, encode_boards, legal_mask
from alphazero_hpc.net.checkpoint import load_model
from alphazero_hpc.net.inference import TorchEvaluator
from alphazero_hpc.net.quantize import calibration_boards, calibration_positions


ROOT = Path(__file__).resolve().parents[1]
TRAINED = ROOT / "docs" / "networks" / "learn-seed22" / "models" / "gen-0069.pt"  # the recipe's 6x64 net, 69 generations


def test_int8_agrees_with_float32_on_a_trained_network_and_is_the_same_in_every_process():
    model, _ = load_model(TRAINED)
    f32, int8 = TorchEvaluator(model, "cpu", "float32"), TorchEvaluator(model, "cpu", "int8")
    assert int8.describe() == "cpu, int8" and "int8" in int8.precision
    boards = calibration_boards(256, seed=11)  # not the calibration's games (seed 0)
    x = encode_boards(boards, model.cfg.history, model.cfg.attack_sets)
    legal = np.stack([legal_mask(b) for b in boards]).astype(bool)
    assert np.array_equal(calibration_positions(model.cfg.history, model.cfg.attack_sets, 256, seed=11), x)
    assert legal.shape == (256, MOVE_PLANES * 64) and legal.any(axis=1).all()
    p32, v32 = f32.evaluate(x)
    p8, v8 = int8.evaluate(x)
    assert p8.dtype == np.float32 and p8.shape == p32.shape and v8.shape == v32.shape
    best32 = np.where(legal, p32, -np.inf).argmax(1)
    best8 = np.where(legal, p8, -np.inf).argmax(1)
    # measured on a Zen 4: 0.93 of the top legal moves the same, values 0.011 apart on [-1, 1] (bf16: 0.96, 0.002);
    # the kernels differ between CPUs (VNNI or not), so the bounds leave room
    assert (best8 == best32).mean() >= 0.85, (best8 == best32).mean()
    assert np.abs(v8 - v32).mean() <= 0.04, np.abs(v8 - v32).mean()
    # an int8 network that ignored its input, or a scale gone wrong, moves the value far more than that
    assert np.abs(v32 - v32.mean()).mean() > 0.1
    again = TorchEvaluator(model, "cpu", "int8").evaluate(x)  # calibrated on the same positions: the same network
    assert np.array_equal(again[0], p8) and np.array_equal(again[1], v8)


def test_int8_off_the_cpu_is_one_line_naming_the_fix():
    model, _ = load_model(TRAINED)
    with pytest.raises(AzhpcError, match=r"mcts.precision int8 runs the network on a CPU only.*--device cpu"):
        TorchEvaluator(model, "cuda", "int8")


def test_self_play_plays_whole_games_with_the_int8_network():
    """The search's own calls (batches of every size its games ask for) through the int8 network: games end and
    record their positions. (Its speed against float32 and bf16: ``azhpc bench selfplay --vary
    mcts.precision=float32,bf16-if-native,int8``, docs/performance.md.)"""
    from alphazero_hpc.config import load_config
    from alphazero_hpc.net.model import build_model
    from alphazero_hpc.selfplay.engine import GameSpec, SelfPlayEngine

    cfg = load_config(ROOT / "configs" / "tiny.yaml", ["mcts.precision=int8", "selfplay.max_plies=16",
                                                       "mcts.simulations=8", "mcts.fast_simulations=2"])
    evaluator = TorchEvaluator(build_model(cfg.model, seed=1), "cpu", cfg.mcts.precision)
    records = list(SelfPlayEngine(evaluator, cfg).play([GameSpec(0, i, 40 + i) for i in range(3)]))
    assert evaluator.int8 and len(records) == 3 and all(r.plies >= 1 and len(r.ply) >= 1 for r in records), records


@pytest.mark.parametrize("cluster", ["slurm", "local"])
def test_a_launch_that_gives_its_tasks_gpus_refuses_int8_at_once_naming_the_fix(cluster):
    """A GPU task would refuse int8 in every self-play task and lose the generation: the launch says so first."""
    from alphazero_hpc.config import load_config
    from alphazero_hpc.launch.plan import make_plan

    cfg = load_config(ROOT / "configs" / "tiny.yaml", ["mcts.precision=int8", "selfplay.games_per_generation=64"])
    fix = "slurm.gpus_per_node: 0" if cluster == "slurm" else "CUDA_VISIBLE_DEVICES="
    with pytest.raises(AzhpcError, match=rf"mcts.precision int8 runs the network on a CPU only.*{fix}"):
        make_plan(cfg, cluster, local_gpus=2)
    cpu = load_config(ROOT / "configs" / "tiny.yaml", ["mcts.precision=int8", "selfplay.games_per_generation=64",
                                                       "slurm.gpus_per_node=0"])
    assert make_plan(cpu, cluster, local_gpus=0, local_cpus=2).gpus_per_node == 0


def test_a_squeeze_excitation_net_quantizes_too():
    """configs/cluster.yaml's nets have squeeze-excitation blocks (pooling, two linear layers, a sigmoid gate)."""
    from alphazero_hpc.config import load_config
    from alphazero_hpc.net.model import build_model

    cfg = load_config(ROOT / "configs" / "tiny.yaml", ["model.se_ratio=4"])
    model = build_model(cfg.model, seed=3)
    assert any(b.se is not None for b in model.tower)
    x = calibration_positions(cfg.model.history, cfg.model.attack_sets, 32, seed=5)
    p32, v32 = TorchEvaluator(model, "cpu", "float32").evaluate(x)
    p8, v8 = TorchEvaluator(model, "cpu", "int8").evaluate(x)
    assert p8.shape == p32.shape and np.abs(v8 - v32).mean() < 0.05 and np.corrcoef(p8.ravel(), p32.ravel())[0, 1] > 0.9


def test_an_int8_network_is_another_player_in_the_ledger():
    """Its moves differ from the float network's (0.93 of best moves alike): its matches get keys and ledger fields of
    their own, never reused for the float network's or the other way round, and ``azhpc elo`` names it apart."""
    import dataclasses

    from alphazero_hpc.config import load_config
    from alphazero_hpc.evaluate.ledger import PlaySetup, search_tag
    from alphazero_hpc.evaluate.runner import MatchPlan

    setup = PlaySetup(1600, True, 0.0, "puct", 3.0, True, True)
    plan = MatchPlan("gen:1", "random", 2, setup, "book", 0, 24)
    floating = MatchPlan("gen:1", "random", 2, dataclasses.replace(setup, int8=False), "book", 0, 24)
    assert plan.key == floating.key + "|int8"
    entry = setup.entry_fields() | {"simulations": 1600}
    assert entry["precision"] == "int8" and PlaySetup.of_entry(entry) == setup
    assert search_tag(entry) == "puct1600,T=3,reuse,int8"  # type: ignore[arg-type]
    cfg = load_config(ROOT / "configs" / "tiny.yaml", ["mcts.precision=int8"])
    assert PlaySetup.of_config(cfg).int8 and not PlaySetup.of_config(load_config(ROOT / "configs" / "tiny.yaml")).int8
    assert search_tag(floating.setup.entry_fields() | {"simulations": 1600}, cfg).endswith(",float")  # type: ignore[arg-type]
