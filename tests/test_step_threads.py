"""The trainer's CPU thread count, measured on its own steps (net/cputhreads.StepThreads): timings are given, not
measured, so each verdict is the rule's and not the host's."""

import pytest
import torch

from alphazero_hpc.net.cputhreads import StepThreads


@pytest.fixture(autouse=True)
def two_threads(monkeypatch):
    monkeypatch.delenv("AZHPC_TORCH_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def drive(tuner: StepThreads, cost: dict[int, float], steps: int) -> list[int]:
    """Run ``steps`` steps whose compute time depends on the thread count; the counts each step ran with."""
    used = []
    for _ in range(steps):
        tuner.before_step()
        used.append(torch.get_num_threads())
        tuner.after_step(cost[torch.get_num_threads()])
    return used


def test_a_busy_machine_gets_one_thread_after_one_slow_step():
    lines: list[str] = []
    tuner = StepThreads(cpu=True, log=lines.append)
    used = drive(tuner, {1: 0.04, 2: 0.6}, 10)
    assert tuner.chosen == 1 and used[:3] == [2, 1, 2] and set(used[3:]) == {1}  # warm step, one clear pair
    assert len(lines) == 1 and "using 1" in lines[0] and "2 threads 600 ms" in lines[0]


def test_a_quiet_machine_keeps_every_thread_after_two_pairs():
    tuner = StepThreads(cpu=True, log=lambda line: None)
    used = drive(tuner, {1: 0.05, 2: 0.03}, 12)
    assert tuner.chosen == 2 and used[:5] == [2, 1, 2, 1, 2] and set(used[5:]) == {2}


def test_load_arriving_mid_run_is_measured_again():
    lines: list[str] = []
    tuner = StepThreads(cpu=True, log=lines.append, window=8)
    drive(tuner, {1: 0.05, 2: 0.03}, 10)
    assert tuner.chosen == 2
    used = drive(tuner, {1: 0.05, 2: 0.5}, 20)  # another process took a core
    assert tuner.chosen == 1 and used[-1] == 1 and any("measured again" in line for line in lines)


def test_times_that_move_with_the_batch_mix_are_measured_again_ever_more_rarely_and_quietly():
    """A rating's batches hold 1 to 64 positions, so its time per 64 positions moves by more than the drift
    threshold from one window to the next while one thread stays the faster count. Each measurement that keeps the
    count doubles the window: over 4000 steps a handful of measurements (each one slow step at two threads), not one
    every other window (~125), and no line after the first."""
    lines: list[str] = []
    tuner = StepThreads(cpu=True, log=lines.append, window=16, max_window=1024)
    used = []
    for step in range(4000):
        tuner.before_step()
        threads = torch.get_num_threads()
        used.append(threads)
        mix = 0.01 if (step // 16) % 2 else 0.05  # windows of small and of large batches, in turn
        tuner.after_step(mix * (1 if threads == 1 else 20))
    assert tuner.chosen == 1 and len(lines) == 1
    assert 1 <= tuner.measurements <= 8, tuner.measurements
    assert used[3:].count(2) == tuner.measurements  # each measurement: one clear pair, one step at two threads


def test_after_quiet_measurements_a_load_that_leaves_is_still_found_and_said():
    """Backing off does not stop the tuner from following the load: once the other process leaves and two threads
    are faster, it changes the count, says so, and checks at the base window again."""
    lines: list[str] = []
    tuner = StepThreads(cpu=True, log=lines.append, window=8, max_window=64)
    for step in range(600):  # busy: one thread far faster, step times moving with the batch mix
        tuner.before_step()
        mix = 0.01 if (step // 8) % 2 else 0.05
        tuner.after_step(mix * (1 if torch.get_num_threads() == 1 else 20))
    assert tuner.chosen == 1 and tuner.measurements >= 1 and len(lines) == 1
    used = drive(tuner, {1: 0.5, 2: 0.03}, 200)  # quiet now (and every step slower at one thread)
    assert tuner.chosen == 2 and set(used[-50:]) == {2}
    assert len(lines) == 2 and lines[1].startswith("measured again") and "using 2" in lines[1]
    used = drive(tuner, {1: 0.05, 2: 0.5}, 40)  # the load is back: found at the base window of 8 again
    assert tuner.chosen == 1 and len(lines) == 3 and used[-10:] == [1] * 10


def test_the_window_doubles_up_to_its_cap_and_a_window_ends_after_max_window_s():
    """Each drift that a measurement answers with the same count doubles the window (8, 16, 32, 64, then 64 at the
    cap); and however long the window, it ends once its steps add up to max_window_s, so a load arriving later is
    found within about that long."""
    tuner = StepThreads(cpu=True, log=lambda line: None, window=8, max_window=64, max_window_s=1e9)
    drive(tuner, {1: 0.01, 2: 0.2}, 3)  # warm step, one clear pair: one thread
    spans, level = [], 0.01
    for _ in range(6):
        before = tuner.measurements
        while tuner.measurements == before:  # the step time jumps 4x each window: a drift each time
            level = 0.04 if level == 0.01 else 0.01
            for _ in range(64):
                tuner.before_step()
                tuner.after_step(level * (1 if torch.get_num_threads() == 1 else 20))
                if tuner.measurements != before:
                    break
        spans.append(tuner._span)
    assert spans == [16, 32, 64, 64, 64, 64] and tuner.chosen == 1
    torch.set_num_threads(2)  # the first tuner left one
    timed = StepThreads(cpu=True, log=lambda line: None, window=8, max_window=1024, max_window_s=2.0)
    drive(timed, {1: 0.1, 2: 2.0}, 3)
    timed._span = 1024  # as after many quiet measurements
    used = drive(timed, {1: 0.1, 2: 2.0}, 20) + drive(timed, {1: 1.0, 2: 0.1}, 40)  # 20 steps = 2 s, then the load leaves
    assert timed.chosen == 2 and used[-10:] == [2] * 10  # found within ~2 s of steps, not 1024 steps


def test_nothing_is_tuned_on_a_gpu_with_one_thread_or_a_fixed_count(monkeypatch):
    for tuner in (StepThreads(cpu=False), ):
        assert drive(tuner, {1: 0.01, 2: 9.0}, 6) == [2] * 6
    torch.set_num_threads(1)
    assert drive(StepThreads(cpu=True), {1: 0.01}, 4) == [1] * 4
    monkeypatch.setenv("AZHPC_TORCH_THREADS", "2")
    assert drive(StepThreads(cpu=True), {1: 0.01, 2: 9.0}, 6) == [2] * 6


def test_a_slow_trial_step_does_not_cause_a_second_measurement():
    """The trial's single step at the kept count was slow (a busy moment); the steps after it are faster. The
    reference is the first window after the decision, so nothing is measured again."""
    lines: list[str] = []
    tuner = StepThreads(cpu=True, log=lines.append, window=8)
    times = iter([0.05, 0.10, 1.5] + [0.035] * 40)  # warm step; 1 thread slow once; 2 threads far slower
    used = []
    for _ in range(43):
        tuner.before_step()
        used.append(torch.get_num_threads())
        tuner.after_step(next(times))
    assert tuner.chosen == 1 and used[3:] == [1] * 40 and len(lines) == 1


def test_an_evaluator_on_a_busy_cpu_ends_on_one_thread(monkeypatch):
    """TorchEvaluator.tune_threads wires StepThreads into the network's own batches: a network whose batches are
    slow with two threads (a busy machine, played here by a model that waits when torch has two) ends on one and
    says so once; its answers are the network's."""
    import time
    from typing import cast

    import numpy as np

    from alphazero_hpc.config import ModelConfig
    from alphazero_hpc.game.encoding import num_planes
    from alphazero_hpc.net import inference
    from alphazero_hpc.net.inference import TorchEvaluator
    from alphazero_hpc.net.model import AlphaZeroNet, build_model

    monkeypatch.setattr(inference, "_fold_batch_norms", lambda model: model)  # fx would trace the wait away

    class Busy(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net, self.cfg = net, net.cfg

        def forward(self, x):
            if torch.get_num_threads() > 1:
                time.sleep(0.05)
            return self.net(x)

    net = build_model(ModelConfig(), seed=0)
    lines: list[str] = []
    ev = TorchEvaluator(cast(AlphaZeroNet, Busy(net)), "cpu", "float32")  # a Module with the net's cfg stands in for it
    ev.tune_threads(log=lines.append)
    planes = np.random.default_rng(0).random((32, num_planes(net.cfg.history), 8, 8), dtype=np.float32)
    for _ in range(8):
        logits, values = ev.evaluate(planes)
    assert torch.get_num_threads() == 1
    assert len(lines) == 1 and "the network on the CPU: 64 positions took" in lines[0] and "using 1" in lines[0]
    want_logits, want_values = TorchEvaluator(net, "cpu", "float32").evaluate(planes)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(values, want_values, rtol=1e-4, atol=1e-5)


def test_tuning_is_true_until_the_trials_are_done():
    tuner = StepThreads(cpu=True, log=lambda line: None)
    seen = []
    for _ in range(6):
        seen.append(tuner.tuning)
        tuner.before_step()
        tuner.after_step({1: 0.04, 2: 0.6}[torch.get_num_threads()])
    assert seen[:3] == [True] * 3 and seen[3:] == [False] * 3 and torch.get_num_threads() == 1  # warm, one clear pair
    assert StepThreads(cpu=False).tuning is False


def test_bench_train_measures_the_trainer_at_the_count_it_would_use(monkeypatch, tmp_path):
    """`azhpc bench train`'s trainer-alone figure runs at the thread count the trainer's StepThreads keeps (here the
    count AZHPC_TORCH_THREADS fixes), not torch's default of every core (several times slower on a busy machine)."""
    from alphazero_hpc.config import load_config
    from alphazero_hpc.tools.bench import bench_train

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AZHPC_TORCH_THREADS", "1")
    cfg = load_config(None, ["model.blocks=1", "model.filters=8", "train.batch_size=16"])
    r = bench_train(cfg, workers=0, steps=10, games=4)
    assert r["trainer_threads"] == 1 and r["trainer_samples_per_s"] > 0 and r["real_run_samples_per_s"] > 0
    assert torch.get_num_threads() == 2  # the caller's count (the fixture's) is left as it was
