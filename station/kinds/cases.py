"""Kinds whose runs are named cases of their section (gpio, avrsim): a case takes the variant's
place in the matrix, and a run id reads <case>-<load>-r<n>."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def case_cells(section: str) -> Callable[[Any], list[tuple[str, str]]]:
    """The cells of a campaign whose `section.cases` names the cases (none without the section)."""

    def cells(campaign: Any) -> list[tuple[str, str]]:
        settings = getattr(campaign, section, None)
        return [("", case) for case in settings.cases] if settings is not None else []

    return cells


def case_run_id(spec: Any) -> str:
    return f"{spec.variant}-{spec.load}-r{spec.repetition}"
