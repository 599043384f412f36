import numpy as np
import pytest
import torch

from alphazero_hpc.net.checkpoint import load_model, save_checkpoint
from alphazero_hpc.config import MCTSConfig, ModelConfig
from alphazero_hpc.game.encoding import NUM_MOVES, encode_boards, num_planes
from alphazero_hpc.errors import CheckpointError, ConfigError, ShardError
from alphazero_hpc.search.fakes import UniformEvaluator
from alphazero_hpc.net.inference import TorchEvaluator
from alphazero_hpc.net.model import build_model, count_parameters
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.shards import read_shard
from alphazero_hpc.selfplay.task import run_selfplay_task

from .conftest import random_game_boards
from .test_selfplay_task import FAST


@pytest.mark.parametrize("blocks,filters,se,history", [(2, 16, 0, 1), (2, 32, 4, 8)])
def test_network_shapes(blocks, filters, se, history):
    net = build_model(ModelConfig(blocks=blocks, filters=filters, se_ratio=se, history=history), seed=0)
    x = torch.zeros(3, num_planes(history), 8, 8)
    policy, value = net(x)
    assert policy.shape == (3, NUM_MOVES) and value.shape == (3, 3)


def test_paper_sized_network_has_the_expected_size():
    net = build_model(ModelConfig(blocks=20, filters=256, history=8, value_hidden=256))
    assert 20e6 < count_parameters(net) < 30e6  # AlphaZero's 20x256 tower is ~23M parameters with its heads


def test_seeded_initial_networks_are_identical():
    a = build_model(ModelConfig(), seed=7).state_dict()
    b = build_model(ModelConfig(), seed=7).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("se,material", [(0, False), (4, False), (0, True)])
def test_evaluator_folds_batch_norms_into_the_same_function(se, material):
    """The evaluator serves the net with each batch norm folded into its convolution: no batch norm is left,
    and a trained-looking net (running statistics and affine weights far from their defaults) answers as the
    unfolded one does (with a material head too, which search never reads)."""
    net = build_model(ModelConfig(blocks=2, filters=16, se_ratio=se, history=2, material_head=material), seed=3)
    gen = torch.Generator().manual_seed(0)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            assert m.running_mean is not None and m.running_var is not None  # (it tracks running statistics)
            m.running_mean.copy_(torch.randn(m.num_features, generator=gen))
            m.running_var.copy_(torch.rand(m.num_features, generator=gen) * 3 + 0.2)
            m.weight.data.copy_(torch.randn(m.num_features, generator=gen))
            m.bias.data.copy_(torch.randn(m.num_features, generator=gen))
    net.eval()
    ev = TorchEvaluator(net, "cpu")
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in ev.model.modules())
    planes = encode_boards(random_game_boards(6, max_plies=30), 2)
    with torch.no_grad():
        policy, value = net(torch.from_numpy(planes))
    wdl = torch.softmax(value, dim=1)
    logits, v = ev.evaluate(planes)
    np.testing.assert_allclose(logits, policy.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(v, (wdl[:, 0] - wdl[:, 2]).numpy(), rtol=1e-4, atol=1e-5)
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules())  # the caller's net is left as it was


def test_evaluator_precision_bf16_answers_close_to_float32_and_auto_keeps_float32_on_cpu():
    """``mcts.precision``: bf16 runs the network under bf16 autocast on the CPU too (its answers differ from float32
    by bf16's rounding, not more); auto and float32 on the CPU are float32 exactly."""
    net = build_model(ModelConfig(blocks=2, filters=32, history=2), seed=5).eval()
    planes = encode_boards(random_game_boards(8, max_plies=40), 2)
    exact = TorchEvaluator(net, "cpu", "float32").evaluate(planes)
    auto = TorchEvaluator(net, "cpu", "auto").evaluate(planes)
    bf16_ev = TorchEvaluator(net, "cpu", "bf16")
    half = bf16_ev.evaluate(planes)
    assert bf16_ev.autocast and not TorchEvaluator(net, "cpu", "auto").autocast
    assert np.array_equal(exact[0], auto[0]) and np.array_equal(exact[1], auto[1])
    assert half[0].dtype == np.float32 and not np.array_equal(exact[0], half[0])  # it did run in bf16
    np.testing.assert_allclose(half[0], exact[0], atol=0.1 * max(1.0, float(np.abs(exact[0]).max())))
    np.testing.assert_allclose(half[1], exact[1], atol=0.05)
    with pytest.raises(ConfigError, match="mcts.precision"):
        MCTSConfig(precision="fp8")  # type: ignore[arg-type]  # not a precision: refused


ZEN3_FLAGS = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse4_2 avx avx2 fma sha_ni\n"
ZEN4_FLAGS = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512bw avx512_bf16 avx512_vnni\n"
SPR_FLAGS = "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


@pytest.mark.parametrize("cpuinfo, native", [(ZEN3_FLAGS, False), (ZEN4_FLAGS, True), (SPR_FLAGS, True),
                                             (GRAVITON3, True), ("", False)])
def test_native_bf16_reads_the_cpus_flags(cpuinfo, native):
    """bf16 instructions: avx512_bf16 or amx_bf16 on x86, bf16 in an aarch64's Features; AVX2 alone (Zen 3, where
    emulated bf16 searched at 0.16x and trained at 0.08x float32) is not."""
    from alphazero_hpc.net.precision import NATIVE_CPU_FLAGS, cpu_flags

    assert bool(cpu_flags(cpuinfo) & NATIVE_CPU_FLAGS) is native


def test_cpu_model_reads_the_model_name_and_falls_back_without_one():
    from alphazero_hpc.net.precision import cpu_model

    two = ("processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\nflags\t: avx2\n\n"
           "processor\t: 1\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: other\n")
    assert cpu_model(two) == "AMD EPYC (family 25 model 17)"  # the first processor's; bare cloud names get their numbers
    assert cpu_model("model name\t: Intel(R) Xeon(R) Processor\n") == "Intel(R) Xeon(R) Processor"
    assert cpu_model(GRAVITON3)  # aarch64 has no model name: the platform's name, never empty


@pytest.mark.parametrize("native", [False, True])
def test_bf16_if_native_runs_bf16_only_on_a_cpu_that_has_it(native, monkeypatch):
    """``bf16-if-native`` (configs/learn.yaml's mcts.precision and train.amp) is float32 exactly on a CPU without bf16
    instructions and bf16 autocast on one with them, in search and in training, and the logs say which; ``bf16``
    stays bf16 either way (what the bf16 tests exercise on any CPU)."""
    from alphazero_hpc.net import precision
    from alphazero_hpc.train.trainer import amp_dtype

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    net = build_model(ModelConfig(blocks=1, filters=16, history=2), seed=7).eval()
    planes = encode_boards(random_game_boards(4, max_plies=30), 2)
    ev = TorchEvaluator(net, "cpu", "bf16-if-native")
    assert ev.autocast is native and TorchEvaluator(net, "cpu", "bf16").autocast
    same = np.array_equal(ev.evaluate(planes)[0], TorchEvaluator(net, "cpu", "float32").evaluate(planes)[0])
    assert same is not native  # float32 exactly, or it did run in bf16
    assert ("float32" in ev.precision and "no bf16 instructions" in ev.precision) is not native
    assert amp_dtype("bf16-if-native", torch.device("cpu")) is (torch.bfloat16 if native else None)
    assert amp_dtype("bf16", torch.device("cpu")) is torch.bfloat16 and amp_dtype("auto", torch.device("cpu")) is None
    assert MCTSConfig(precision="bf16-if-native").precision == "bf16-if-native"


@pytest.mark.parametrize("precision", ["float32", "bf16"])
def test_evaluator_channels_last_lays_out_weights_and_batches_as_nhwc_with_the_same_answers(precision):
    """``mcts.channels_last`` (on by default): the CPU's weights and batches are channels-last, and the answers are
    the contiguous layout's within float rounding (oneDNN may sum in another order)."""
    net = build_model(ModelConfig(blocks=2, filters=32, history=2, attack_planes=True), seed=6).eval()
    planes = encode_boards(random_game_boards(8, max_plies=40), 2, attacks=1)
    plain, nhwc = TorchEvaluator(net, "cpu", precision, channels_last=False), TorchEvaluator(net, "cpu", precision)
    assert nhwc.channels_last and not plain.channels_last
    conv = next(m for m in nhwc.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last) and not conv.weight.is_contiguous()
    a, b = plain.evaluate(planes), nhwc.evaluate(planes)
    tol = 1e-4 if precision == "float32" else 0.05
    np.testing.assert_allclose(b[0], a[0], atol=tol * max(1.0, float(np.abs(a[0]).max())))
    np.testing.assert_allclose(b[1], a[1], atol=tol)
    assert MCTSConfig().channels_last and not MCTSConfig(channels_last=False).channels_last


def test_checkpoint_round_trip_and_config_mismatch(tmp_path):
    cfg = ModelConfig(blocks=1, filters=16)
    net = build_model(cfg, seed=1)
    path = tmp_path / "m.pt"
    save_checkpoint(path, net, generation=3)
    loaded, payload = load_model(path, expect=cfg)
    assert payload["generation"] == 3
    planes = encode_boards(random_game_boards(1, max_plies=10), 2)
    e1 = TorchEvaluator(net.eval()).evaluate(planes)
    e2 = TorchEvaluator(loaded).evaluate(planes)
    assert np.allclose(e1[0], e2[0]) and np.allclose(e1[1], e2[1])
    with pytest.raises(CheckpointError, match="made for model"):
        load_model(path, expect=ModelConfig(blocks=2, filters=16))
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="corrupt"):
        load_model(path)


def test_shard_round_trip_truncation_and_foreign_files(tmp_path):
    run_selfplay_task(tmp_path, 0, 0, 6, None, FAST, evaluator=UniformEvaluator(2))
    path = RunPaths(tmp_path).shard(0, 0, 0)
    data, attrs = read_shard(path, expect_history=2)
    assert len(data) == attrs["rows"] > 0
    assert data.policy_offset[-1] == len(data.policy_index)
    assert np.all(data.policy_index < NUM_MOVES)
    with pytest.raises(ShardError, match="history"):
        read_shard(path, expect_history=8)
    cut = tmp_path / "cut.h5"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ShardError, match="cut.h5.*truncated or corrupt"):
        read_shard(cut)
    import h5py

    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as h5:
        h5["x"] = np.zeros(3)
    with pytest.raises(ShardError, match="not an azhpc self-play shard"):
        read_shard(foreign)


def test_doctor_reports_cpu_and_missing_or_present_slurm(tmp_path):
    from alphazero_hpc.tools.doctor import run_doctor

    checks = {c.name: c for c in run_doctor(tmp_path)}
    assert checks["device cpu"].ok and "matmul" in checks["device cpu"].detail
    assert checks["run folder"].ok
    assert "sbatch" in checks and "torch" in checks["versions"].detail


@pytest.mark.parametrize("dataset,value,message", [
    ("value_target", lambda d: np.full_like(d, 3), "value_target holds values other than"),
    ("bitboards", lambda d: d[:, :, :7].copy(), "bitboards have shape"),
    ("policy_prob", lambda d: np.full_like(d, np.nan), "policy_prob holds negative or non-finite"),
])
def test_shard_contents_that_used_to_pass_are_refused(tmp_path, dataset, value, message):
    import h5py

    run_selfplay_task(tmp_path, 0, 0, 6, None, FAST, evaluator=UniformEvaluator(2))
    path = RunPaths(tmp_path).shard(0, 0, 0)
    with h5py.File(path, "r+") as h5:
        new = value(h5[dataset][...])
        del h5[dataset]
        h5[dataset] = new
    with pytest.raises(ShardError, match=message):
        read_shard(path)


def test_a_damaged_sidecar_is_set_aside_and_its_shard_played_again(tmp_path):
    import json

    paths = RunPaths(tmp_path)
    run_selfplay_task(tmp_path, 0, 0, 2, None, FAST, evaluator=UniformEvaluator(2))
    sidecar = paths.sidecar(0, 0, 1)
    before = json.loads(sidecar.read_text())
    broken = {k: v for k, v in before.items() if k != "rows"}
    sidecar.write_text(json.dumps(broken))
    p = run_selfplay_task(tmp_path, 0, 0, 2, None, FAST, evaluator=UniformEvaluator(2))  # was: KeyError
    assert p.status == "done"
    assert json.loads(sidecar.read_text()) == before  # played again: the same games, the same sidecar
    assert sidecar.with_name(sidecar.name + ".bad").exists()
