"""Options that several commands share, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import click

CONFIG_HELP = "YAML config (configs/tiny.yaml, small.yaml, cluster.yaml). Env: AZHPC_CONFIG."
SET_HELP = "Override a config value, e.g. --set mcts.simulations=64 (repeatable)."


def config_options(default: str | None = None, set_note: str = "") -> Callable[[Callable], Callable]:
    """``--config PATH`` and ``--set SECTION.KEY=VALUE`` (repeatable), passed as ``config_path`` and ``overrides``.
    Without ``default`` the config may come from ``AZHPC_CONFIG``; with one (a benchmark's), that file is the
    default."""

    def decorate(command: Callable) -> Callable:
        command = click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
                               help=SET_HELP + set_note)(command)
        if default is None:
            return click.option("--config", "config_path", type=click.Path(path_type=Path), envvar="AZHPC_CONFIG",
                                help=CONFIG_HELP)(command)
        return click.option("--config", "config_path", type=click.Path(path_type=Path), default=Path(default),
                            show_default=True, help=CONFIG_HELP)(command)

    return decorate
