"""Options that several commands share, declared once."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

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


def renamed(old: str, new: str, dest: str, **option: Any) -> Callable[[Callable], Callable]:
    """Keep ``old``, a spelling this release renamed to ``new``, working: a hidden option whose value goes to the
    command's ``dest`` parameter, with one line on stderr when it is given on the command line (not from the
    environment). ``option``: the old option's click settings (type, envvar, ...)."""
    key = f"renamed:{dest}"

    def remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None:
            ctx.meta[key] = value
            if ctx.get_parameter_source(param.name) is click.core.ParameterSource.COMMANDLINE:
                click.echo(f"azhpc: {old} is now {new} ({old} still works in this release)", err=True)
        return value

    def decorate(command: Callable) -> Callable:
        @functools.wraps(command)
        def with_old_spelling(*args: Any, **kwargs: Any) -> Any:
            ctx = click.get_current_context()
            if key in ctx.meta and kwargs.get(dest) in (None, ()):
                kwargs[dest] = ctx.meta[key]
            elif key in ctx.meta and kwargs.get(dest) != ctx.meta[key]:
                given = ctx.get_parameter_source(dest)
                if given is click.core.ParameterSource.DEFAULT:
                    kwargs[dest] = ctx.meta[key]
            return command(*args, **kwargs)

        return click.option(old, f"_renamed_{dest}", default=None, hidden=True, expose_value=False, callback=remember,
                            **option)(with_old_spelling)

    return decorate
