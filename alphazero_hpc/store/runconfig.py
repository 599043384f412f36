"""The run folder's resolved config: written once, then the single source of truth for every stage."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import yaml

from . import atomic
from ..config import Config, config_diff, config_from_dict, load_config
from ..errors import ConfigError, RunDirError
from .paths import RunPaths


def read_run_config(paths: RunPaths) -> Config:
    try:
        data = yaml.safe_load(paths.config.read_text())
    except FileNotFoundError as exc:
        raise RunDirError(f"{paths.root} is not an azhpc run folder (no config.yaml): check the run folder") from exc
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{paths.config} is corrupt ({str(exc).splitlines()[0]}): restore it from a backup or from "
                          "the config the run was launched with (each checkpoint and shard records its digest)") from exc
    try:
        return config_from_dict(data)
    except ConfigError as exc:
        raise RunDirError(f"{paths.config} does not match this azhpc ({exc}): use the azhpc version that made the run") from exc


def run_config_if_any(paths: RunPaths) -> Config | None:
    """The run's config, or None for a folder without one (a ledger of matches between engines only)."""
    return read_run_config(paths) if paths.config.exists() else None


def resolve_run_config(paths: RunPaths, config_path: str | Path | None = None, overrides: Sequence[str] = ()) -> Config:
    """The run's config. The first call writes it; later calls that pass a config must agree with it."""
    given = config_path is not None or bool(overrides)
    if paths.config.exists():
        stored = read_run_config(paths)
        if given:
            wanted = load_config(config_path, overrides)
            diff = config_diff(stored, wanted)
            if diff:
                raise RunDirError(
                    f"run folder {paths.root} was made with another config ({'; '.join(diff[:3])}"
                    f"{'; ...' if len(diff) > 3 else ''}): drop --config/--set to use the run's own, or choose a new --run-dir"
                )
        return stored
    cfg = load_config(config_path, overrides)
    atomic.write_text(paths.config, cfg.to_yaml(), doing="writing the run config")
    return cfg
