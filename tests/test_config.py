import re

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


# -- values that passed the checks and then failed later (issue 17, item 7) -------------------------------
@pytest.mark.parametrize("override,message", [
    ("train.replay_ratio=inf", "finite"),
    ("train.lr=1e999", "finite"),
    ("train.lr=.nan", "finite"),
    ("mcts.c_init=-.inf", "finite"),
    ("run.seed=18446744073709551616", "64 bits"),
    ("selfplay.temperature=0.001", "0.05..100"),
    ("selfplay.final_temperature=1e-9", "0.05..100"),
    ("model.value_hidden=1000000000000", "8..65536"),
    ("mcts.lazy_rows=1000000", "0..200000"),  # 18.7 GB of logits rows per search process
    ("mcts.lazy_rows=-1", "0..200000"),
    ("mcts.leaf_capture_value=-0.5", r"\[0, 4\]"),
    ("mcts.leaf_capture_value=.nan", "finite"),
    ("train.value_target_horizon=-1", r"\[0, 1000\]"),
    ("train.value_target_horizon=4", "needs train.value_target_q_ratio > 0"),  # the default ratio 0 ignores it
    ("train.material_horizon=0", r"\[1, 1000\]"),
    ("train.material_weight=-1", r"\[0, 100\]"),
    ("slurm.selfplay_time_min=1", "below the shortest time limit"),
    ("slurm.partition=gpu #x", "only letters"),
])
def test_values_that_would_fail_later_are_refused_now(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_string_keys_keep_their_text():
    cfg = load_config(None, ["slurm.account=12345", "slurm.qos=no", "slurm.partition=gpu"])
    assert (cfg.slurm.account, cfg.slurm.qos, cfg.slurm.partition) == ("12345", "no", "gpu")


def test_a_config_file_that_is_not_text_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"model:\n  blocks: \xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(bad)


def test_a_corrupt_run_config_is_one_line_in_status(tmp_path):
    from .conftest import run_cli

    paths = RunPaths(tmp_path / "run")
    resolve_run_config(paths, None, [])
    paths.config.write_text("model: [unclosed\n")
    r = run_cli("status", str(paths.root))
    assert r.returncode == 1 and "is corrupt" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_launch_flags_are_strings_as_typed():
    from .conftest import run_cli

    r = run_cli("launch", "--cluster", "slurm", "--dry-run", "--config", str(ROOT / "configs" / "tiny.yaml"),
                "--account", "12345", "--qos", "no", "--generations", "1")
    assert r.returncode == 0, r.stderr
    assert "--account=12345" in r.stdout and "--qos=no" in r.stdout
    r = run_cli("launch", "--cluster", "slurm", "--dry-run", "--selfplay-time", "1")
    assert r.returncode == 1 and "stop_margin_s" in r.stderr and "Traceback" not in r.stderr


def test_selfplay_of_a_generation_without_its_network_writes_nothing(tmp_path):
    from .conftest import run_cli

    run = tmp_path / "new"
    r = run_cli("selfplay", str(run), "--generation", "3", "--config", str(ROOT / "configs" / "tiny.yaml"))
    assert r.returncode == 1 and "gen-0003.pt not found" in r.stderr
    assert not run.exists()  # so azhpc launch can still use the folder


def test_every_status_a_progress_record_writes_is_one_of_the_typed_statuses():
    """Status strings are written once (store.progress.Status); a literal status anywhere else in the package that
    is not one of them fails here."""
    import re

    from alphazero_hpc.store.progress import STATUSES

    from .conftest import ROOT

    found = set()
    for path in (ROOT / "alphazero_hpc").rglob("*.py"):
        text = path.read_text()
        found |= set(re.findall(r"\bstatus\s*(?:==|!=|=)\s*\"([a-z ]+)\"", text))
        found |= set(re.findall(r"\bstatus=\"([a-z ]+)\"", text))
    assert found and found <= set(STATUSES), found - set(STATUSES)


def test_every_choice_key_is_a_literal_checked_in_one_place():
    """Each enumerated key is a Literal: each of its choices loads, a value outside them is one line naming them all,
    and no section checks a choice by hand (``_check(self.x in (...))``) beside ``_check_choices``."""
    import dataclasses
    import typing

    from alphazero_hpc.config import SECTIONS, _choices

    from .conftest import ROOT

    literal = [(s, f.name, _choices(typing.get_type_hints(cls)[f.name])) for s, cls in SECTIONS.items()
               for f in dataclasses.fields(cls) if _choices(typing.get_type_hints(cls)[f.name])]
    assert {f"{s}.{k}" for s, k, _ in literal} >= {"mcts.algorithm", "mcts.precision", "train.amp", "pretrain.lr_schedule",
                                                   "selfplay.shard_compression", "selfplay.repetitions_for_draw"}
    needs = {"mcts.gumbel_root_value": ["mcts.algorithm=gumbel"]}  # choices that another key's value allows
    for section, key, choices in literal:
        for choice in choices:
            overrides = [*needs.get(f"{section}.{key}", []), f"{section}.{key}={choice}"]
            assert getattr(getattr(load_config(None, overrides), section), key) == choice
        with pytest.raises(ConfigError, match=f"{section}.{key}: must be one of {', '.join(map(str, choices))}, got"):
            load_config(None, [f"{section}.{key}={'nonesuch' if isinstance(choices[0], str) else 999}"])
    source = (ROOT / "alphazero_hpc" / "config.py").read_text()
    assert not re.search(r"_check\(self\.\w+ in \(", source)


def test_a_bare_off_in_a_yaml_file_is_the_choice_off(tmp_path):
    """YAML 1.1 reads ``amp: off`` as False; a choice named off takes it, a choice list without one refuses it."""
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  amp: off\n")
    assert load_config(path).train.amp == "off"
    path.write_text("mcts:\n  algorithm: off\n")
    with pytest.raises(ConfigError, match="mcts.algorithm: expected str, got False"):
        load_config(path)


def test_every_state_string_is_one_of_the_typed_states():
    """What status shows of a stage, a local job or the supervisor is typed (report.status.StageState,
    launch.record.LocalJobState / SupervisorState); a lower-case state literal anywhere else fails here."""
    import typing

    from alphazero_hpc.launch.record import LocalJobState, SupervisorState
    from alphazero_hpc.report.status import StageState

    from .conftest import ROOT

    typed = {*typing.get_args(StageState), *typing.get_args(LocalJobState), *typing.get_args(SupervisorState)}
    found = set()
    for path in (ROOT / "alphazero_hpc").rglob("*.py"):
        text = path.read_text()
        found |= set(re.findall(r"\bstate\s*(?:==|!=|=)\s*\"([a-z ]+)\"", text))
        found |= set(re.findall(r"\bstate=\"([a-z ]+)\"", text))
        found |= set(re.findall(r"\[\"state\"\]\s*=\s*\"([a-z ]+)\"", text))
    assert len(found) >= 5 and found <= typed, found - typed
