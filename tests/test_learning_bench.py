"""``azhpc bench learning`` end to end on a tiny budget: two arms, one ladder with shared anchors, one figure."""

import json

import pytest

from alphazero_hpc.evaluate.scale import load_scale
from alphazero_hpc.store.paths import BenchmarkPaths

from .conftest import ROOT, TINY, run_cli

SMALL = ["--set", "selfplay.games_per_generation=4", "--set", "selfplay.games_per_shard=2", "--set", "selfplay.max_plies=30",
         "--set", "eval.simulations=4", "--set", "eval.max_plies=40", "--set", "train.loader_workers=0"]


@pytest.mark.slow
def test_two_arms_on_one_cpu_budget_end_in_one_ladder(tmp_path, stockfish):
    out = BenchmarkPaths(tmp_path / "bench")
    args = ["bench", "learning", "--config", str(TINY), "--out", str(out.root), "--budget-cpu-hours", "0.002",
            "--arms", "puct,gumbel8", "--games", "2", "--ladder-games", "2", "--stockfish-nodes", "10", *SMALL,
            "--set", "eval.scale_interval=2000", "--set", "eval.scale_max_games=10"]  # rated on the shipped scale: one probe
    r = run_cli(*args, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    arms = json.loads(out.summary.read_text())["arms"]
    assert set(arms) == {"puct", "gumbel8"}
    for name, arm in arms.items():
        assert arm["generations"] >= 1 and arm["cpu_s"][-1] >= 0.002 * 3600  # trained until the budget was spent
        assert arm["cpu_s"] == sorted(arm["cpu_s"])
        assert out.arm(name).model(arm["generations"]).exists()
    cfg = (out.arm("gumbel8").config).read_text()
    assert "algorithm: gumbel" in cfg and "simulations: 8" in cfg
    ladder = json.loads(out.ladder.read_text())
    names = {row["name"] for row in ladder["ratings"]}
    assert {"random", "greedy", "stockfish:skill=0,nodes=10"} <= names
    assert ladder["anchor"] == "Stockfish 15.1 UCI_Elo scale"  # all arms in one fit with the rungs pinned
    rungs = {r.name: r.elo for r in load_scale()}
    for row in ladder["ratings"]:
        if row["name"] in rungs:
            assert row["elo"] == pytest.approx(rungs[row["name"]])
    assert r.stdout.count("on the Stockfish 15.1 UCI_Elo scale [") == 2  # each arm's last network, one line each
    assert {f"puct/gen:{arms['puct']['generations']}", f"gumbel8/gen:{arms['gumbel8']['generations']}"} <= names
    assert "puct" in r.stdout and "gumbel8" in r.stdout and "anchors:" in r.stdout
    from alphazero_hpc.net.precision import cpu_model
    for name, arm in arms.items():  # the CPU that ran the generations, beside their CPU-hours
        assert arm["cpus"] == {cpu_model(): arm["generations"]}
        assert f"{name} trained on {cpu_model()} ({arm['generations']} generation" in r.stdout
    shards = list(out.arm("gumbel8").root.glob("selfplay/gen-0000/task-*/shard-*.h5"))
    assert shards
    # Started again, the benchmark continues: nothing is trained again, no match is played twice.
    again = run_cli(*args, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(out.summary.read_text())["arms"] == arms
    plot = run_cli("plot", str(out.root))
    assert plot.returncode == 0, plot.stderr
    assert out.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_learn_yaml_is_the_best_arm_and_the_arms_keep_their_meaning():
    """configs/learn.yaml is the best arm as measured; every arm names its own network and training, so the old 2x32
    arms still mean configs/learn-2x32.yaml (the config they were measured with) whatever learn.yaml becomes."""
    from alphazero_hpc.config import load_config
    from alphazero_hpc.tools.learning import ARMS, BEST_ARM

    learn, old = ROOT / "configs" / "learn.yaml", ROOT / "configs" / "learn-2x32.yaml"
    assert load_config(learn, []) == load_config(learn, list(ARMS[BEST_ARM]))
    assert load_config(old, []) == load_config(learn, list(ARMS["gumbel16-q"]))
    for name, overrides in ARMS.items():  # the same arm from either config: nothing left to the base config's choice
        a, b = load_config(learn, list(overrides)), load_config(old, list(overrides))
        assert (a.model, a.mcts, a.selfplay, a.train) == (b.model, b.mcts, b.selfplay, b.train), name


def test_a_stopped_generation_counts_the_cpu_it_used(tmp_path, monkeypatch):
    """A benchmark stopped mid-generation (SIGTERM or Ctrl-C; the supervisor reaps its children) and started again
    counts the CPU of both attempts at that generation: the work it kept was paid for."""
    import subprocess
    import sys

    from alphazero_hpc.errors import AzhpcError
    from alphazero_hpc.tools import learning

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"
    attempts = iter([KeyboardInterrupt, False, True])  # Ctrl-C, a stop the supervisor reports, then the generation ends

    def attempt(*args):
        subprocess.run([sys.executable, "-c", burn], check=True)  # a child's CPU, as a stage's
        outcome = next(attempts)
        if outcome is KeyboardInterrupt:
            raise KeyboardInterrupt
        return outcome

    monkeypatch.setattr(learning, "_run_generation", attempt)
    out = BenchmarkPaths(tmp_path / "bench")

    def train():
        return learning.train_arm(out, "arm", TINY, (), budget_s=0.1, echo=lambda line: None)

    def unfinished():
        return json.loads(out.summary.read_text())["arms"]["arm"]["unfinished_cpu_s"]

    with pytest.raises(KeyboardInterrupt):
        train()
    first = unfinished()
    assert first >= 0.4
    with pytest.raises(AzhpcError, match="generation 0 failed or was stopped"):
        train()
    assert unfinished() >= first + 0.4  # the second stopped attempt adds to the first
    arm = train()
    assert arm.generations == 1 and arm.cpu_s[0] >= 1.2  # all three attempts, not the last one alone
    saved = json.loads(out.summary.read_text())["arms"]["arm"]
    assert saved["cpu_s"] == arm.cpu_s and saved["unfinished_cpu_s"] == 0.0
    assert saved["cpus"] == arm.cpus == {learning.cpu_model(): 1}


def test_an_arm_names_the_cpus_its_generations_ran_on_and_counts_the_ones_from_before(tmp_path, monkeypatch):
    """An arm resumed on another machine keeps the first machine's count and adds its own; a summary written before
    the CPU was recorded reads as generations whose CPU is not recorded, not as this machine's."""
    from alphazero_hpc.tools import learning

    out = BenchmarkPaths(tmp_path / "bench")
    out.summary.parent.mkdir(parents=True, exist_ok=True)
    old = {"name": "arm", "overrides": [], "generations": 2, "cpu_s": [1.0, 2.0], "wall_s": 3.0, "unfinished_cpu_s": 0.0}
    out.summary.write_text(json.dumps({"arms": {"arm": old}}))  # as bench learning wrote it before 2026-12-03
    monkeypatch.setattr(learning, "_run_generation", lambda *args: True)
    monkeypatch.setattr(learning, "cpu_model", lambda: "Other CPU (family 1 model 2)")
    arm = learning.train_arm(out, "arm", TINY, (), budget_s=10.0, echo=lambda line: None, max_generations=4)
    assert arm.generations == 4 and arm.cpus == {"Other CPU (family 1 model 2)": 2}
    assert arm.cpu_line() == "Other CPU (family 1 model 2) (2 generations); CPU not recorded (2 generations)"
    monkeypatch.setattr(learning, "cpu_model", lambda: "Third CPU")
    outcomes = iter([True, KeyboardInterrupt, True])  # one generation, a Ctrl-C, then the generation finishes

    def attempt(*args):
        outcome = next(outcomes)
        if outcome is KeyboardInterrupt:
            raise KeyboardInterrupt
        return outcome

    monkeypatch.setattr(learning, "_run_generation", attempt)
    with pytest.raises(KeyboardInterrupt):
        learning.train_arm(out, "arm", TINY, (), budget_s=10.0, echo=lambda line: None, max_generations=6)
    saved = json.loads(out.summary.read_text())["arms"]["arm"]  # the stop keeps every finished generation's CPU
    assert saved["generations"] == 5 and saved["cpus"] == {"Other CPU (family 1 model 2)": 2, "Third CPU": 1}
    arm = learning.train_arm(out, "arm", TINY, (), budget_s=10.0, echo=lambda line: None, max_generations=6)
    assert arm.cpus == {"Other CPU (family 1 model 2)": 2, "Third CPU": 2}
    line = learning.render([arm], [])
    assert "arm trained on " in line and "Third CPU (2 generations)" in line
    assert "Other CPU (family 1 model 2) (2 generations)" in line and "CPU not recorded (2 generations)" in line


def test_combined_ladder_leaves_out_an_arms_anchor_block_whose_engine_shared_one_process(tmp_path):
    """bench learning's one fit over every arm counts an arm's block against the anchor only when each of its games had
    its own engine process, as every other fit (shared_engine_block)."""
    from typing import cast

    from alphazero_hpc.evaluate.ledger import LedgerEntry, append_entry
    from alphazero_hpc.evaluate.scale import ANCHOR
    from alphazero_hpc.tools.learning import ArmResult, combined_ladder

    out = BenchmarkPaths(tmp_path / "bench")
    arm = ArmResult("a", (), 1, [1.0], 1.0)
    paths = out.arm("a")
    paths.eval_dir.mkdir(parents=True)

    def block(key: str, opponent: str, w: int, l: int, **extra: object) -> None:
        append_entry(paths, cast(LedgerEntry, {"key": key, "player": "gen:1", "opponent": opponent, "wins": w,
                                               "draws": 0, "losses": l, "games": w + l, **extra}))

    def fitted() -> tuple[float, int]:
        table = combined_ladder(out, [arm])
        return next(r["elo"] for r in table if r["name"] == "a/gen:1"), json.loads(out.ladder.read_text())["matches"]

    block("x", "fairy-stockfish:skill=-2,depth=1", 18, 2)
    alone = fitted()
    block("y", ANCHOR, 9, 1)  # the anchor of before, one process for every game: not counted
    assert fitted() == alone
    block("z", ANCHOR, 1, 9, engine_per_game=True)
    elo, matches = fitted()
    assert matches == 2 and elo < alone[0]
