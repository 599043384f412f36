"""The ``azhpc`` group: errors a user can cause become one line on stderr and exit status 1 (``AZHPC_DEBUG=1``
shows tracebacks)."""

from __future__ import annotations

import click

from ..errors import AzhpcError, debugging

class AzhpcGroup(click.Group):
    """Turns AzhpcError and OSError into one-line messages unless AZHPC_DEBUG is set, and lists each command with
    its whole first sentence (click cuts them at the terminal's width)."""

    group_class = type  # subgroups (bench, ladder) are AzhpcGroups too

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, cmd.get_short_help_str(limit=10_000)) for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (AzhpcError, OSError) as exc:
            if debugging():
                raise
            if isinstance(exc, OSError):
                from ..errors import describe_os_error

                exc = describe_os_error(exc, exc.filename or "", "accessing")
            raise click.ClickException(str(exc)) from None


@click.group(cls=AzhpcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="alphazero_hpc")
def main() -> None:
    """AlphaZero-style chess training on SLURM clusters, or on one machine."""

