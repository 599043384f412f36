import pytest
import yaml

from alphazero_hpc.config import Config, config_diff, load_config, parse_override
from alphazero_hpc.errors import ConfigError, RunDirError
from alphazero_hpc.store.paths import RunPaths
from alphazero_hpc.store.runconfig import resolve_run_config

from .conftest import ROOT


@pytest.mark.parametrize("name", ["tiny", "small", "cluster", "paper"])
def test_presets_load_and_round_trip(name, tmp_path):
    cfg = load_config(ROOT / "configs" / f"{name}.yaml")
    again = tmp_path / "again.yaml"
    again.write_text(cfg.to_yaml())
    assert load_config(again) == cfg
    assert cfg.digest() == load_config(again).digest()


def test_cluster_preset_is_a_real_cluster_run():
    cfg = load_config(ROOT / "configs" / "cluster.yaml")
    assert cfg.model.blocks >= 10 and cfg.model.filters >= 128 and cfg.mcts.simulations >= 400


def test_overrides_are_type_checked_against_the_field():
    cfg = load_config(None, ["mcts.simulations=64", "mcts.c_init=2", "mcts.tree_reuse=false", "slurm.partition=gpu"])
    assert cfg.mcts.simulations == 64 and cfg.mcts.c_init == 2.0 and isinstance(cfg.mcts.c_init, float)
    assert cfg.mcts.tree_reuse is False and cfg.slurm.partition == "gpu"
    assert load_config(None, ["train.lr=1e-3"]).train.lr == 1e-3  # YAML 1.1 reads this as a string
    with pytest.raises(ConfigError, match="mcts.tree_reuse: expected bool"):
        load_config(None, ["mcts.tree_reuse=1"])
    with pytest.raises(ConfigError, match="mcts.simulations: expected int"):
        load_config(None, ["mcts.simulations=1.5"])
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_override("simulations=5")


def test_digest_and_diff_see_every_change():
    a, b = Config(), load_config(None, ["train.lr=0.5"])
    assert a.digest() != b.digest()
    assert config_diff(a, b) == ["train.lr: 0.02 -> 0.5"]


def test_run_config_is_written_once_and_then_authoritative(tmp_path):
    paths = RunPaths(tmp_path)
    first = resolve_run_config(paths, None, ["mcts.simulations=9"])
    assert yaml.safe_load(paths.config.read_text())["mcts"]["simulations"] == 9
    assert resolve_run_config(paths) == first  # no config given: the run's own
    assert resolve_run_config(paths, None, ["mcts.simulations=9"]) == first  # agreeing is fine
    with pytest.raises(RunDirError, match="another config"):
        resolve_run_config(paths, None, ["mcts.simulations=10"])
