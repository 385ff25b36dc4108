"""How `station --help` shows its options: a flag as a flag (no <bool>), an argument's type only
where its name does not say it, on every command and group of a typer app."""

from __future__ import annotations

import typer
from typer.core import TyperCommand, TyperGroup

FLAG = ""  # a flag takes no value: show none (typer would print <bool>)


class _FlagHelp:
    """The help option is a flag: no value to show (typer would print <bool> beside it)."""

    def get_help_option(self, ctx: typer.Context):  # noqa: ANN201 - the framework's option type
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = FLAG
        return option


class _Command(_FlagHelp, TyperCommand):
    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 - click's signature
        super().__init__(*args, **kwargs)
        for param in self.params:
            if param.param_type_name == "argument":
                param.display_type_rich = _argument_type(param)  # type: ignore[attr-defined]


def _argument_type(param):  # noqa: ANN001, ANN202 - typer's argument and its bound method
    """An argument's type column: none where its name says it (RESOURCE: typer would add a bare
    <str>), `<path>...` for several paths (typer: <list[Path]>)."""
    typer_label = param.display_type_rich

    def label(ctx: typer.Context) -> str | None:
        if param.metavar:
            return None
        shown = typer_label(ctx)
        if shown and shown.startswith("<list[") and shown.endswith("]>"):
            return f"<{shown[6:-2].lower()}>..."
        return shown

    return label


class _Group(_FlagHelp, TyperGroup):
    pass


def flag_help(typer_app: typer.Typer) -> None:
    """Every command and group of `typer_app` shows its help option as a flag."""
    group_cls = typer_app.info.cls
    if not (isinstance(group_cls, type) and issubclass(group_cls, _FlagHelp)):
        # typer's default is a placeholder
        base = group_cls if isinstance(group_cls, type) else TyperGroup
        typer_app.info.cls = _Group if base is TyperGroup else type(f"{base.__name__}Flag",
                                                                    (_FlagHelp, base), {})
    for command in typer_app.registered_commands:
        if command.cls in (None, TyperCommand):
            command.cls = _Command
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            flag_help(group.typer_instance)
