"""docs/report-schema.md's field tables, generated from report.json's models (station.report.model).

The doc keeps its prose by hand; each model's table sits between two markers the generator owns:

    <!-- generated: ModuleRun -->

    | field | type | description |
    ...

    <!-- end generated -->

`render_doc` refills every marked block, so the doc cannot drift from the models
(tests/test_report_schema.py checks the committed doc against it).
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel

from station import kind_registry
from station.report.model import ReportCore, build_report_model, report_model

BEGIN = "<!-- generated: {name} -->"
END = "<!-- end generated -->"
_BLOCK = re.compile(r"<!-- generated: (\w+) -->\n.*?<!-- end generated -->", re.S)


def documented_model() -> type[ReportCore]:
    """report.json's model with the station's own kinds (a plug-in's or a test's kind documents
    itself)."""
    return build_report_model([k for k in kind_registry.kinds().values()
                               if isinstance(k.report_model,
                                             str) and k.report_model.startswith("station.")])


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    """root and every model its fields reach, depth first in field order, each once."""
    found: list[type[BaseModel]] = []

    def visit(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in found:
                found.append(annotation)
                for info in annotation.model_fields.values():
                    visit(info.annotation)
            return
        for arg in typing.get_args(annotation):
            visit(arg)

    visit(root)
    return found


def _type(annotation: Any) -> str:
    """A field's type in the doc's words: `str`, `list of Stats`, `object str → int`,
    `… \\| null`."""
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation.__name__
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in args)
    if origin in (types.UnionType, typing.Union):
        return " \\| ".join(_type(a) for a in args)
    if origin is list:
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict:
        return f"object {_type(args[0])} → {_type(args[1])}" if args else "object"
    return getattr(annotation, "__name__", str(annotation))


def model_table(model: type[BaseModel]) -> str:
    """The model's one-line summary and its fields: name (`?`: may be absent), type, description."""
    doc = " ".join((model.__doc__ or "").split())
    lines = [f"*{model.__name__}*: {doc}" if doc else f"*{model.__name__}*", "",
             "| field | type | description |", "|---|---|---|"]
    for name, info in model.model_fields.items():
        key = info.alias or name
        optional = "" if info.is_required() else " ?"
        lines.append(f"| `{key}`{optional} | {_type(info.annotation)} | {info.description or ''} |")
    if model.model_config.get("extra") == "allow":
        lines.append("| … | | other keys (open-ended, see above) |")
    return "\n".join(lines)


def tables(root: type[BaseModel] | None = None) -> dict[str, str]:
    """Every model's table by the model's name, the top level first (default: the documented
    model)."""
    return {m.__name__: model_table(m) for m in _models(root or documented_model())}


def manifest_tables() -> dict[str, str]:
    """docs/manifest-schema.md's tables: the core's models, then each of the station's own kinds'
    manifest part (a plug-in's documents itself)."""
    from station.store.manifest import Manifest

    found = tables(Manifest)
    for kind in kind_registry.kinds().values():
        model = kind.load("manifest_model")
        if model is not None and model.__module__.startswith("station."):
            found |= tables(model)
    return found


def render_doc(text: str, generated: dict[str, str] | None = None) -> str:
    """The doc with every marked block refilled from `generated` (default: report.json's tables);
    raises ValueError on a block naming no model, or on a model without a block (a field table
    nobody reads)."""
    generated = generated if generated is not None else tables()
    named = _BLOCK.findall(text)
    unknown = sorted(set(named) - set(generated))
    missing = [n for n in generated if n not in named]
    if unknown or missing:
        raise ValueError(f"schema doc markers: unknown models {unknown}, models without a block "
                         f"{missing}")
    return _BLOCK.sub(lambda m: f"{BEGIN.format(name=m[1])}\n\n{generated[m[1]]}\n\n{END}", text)


def markdown() -> str:
    """Every registered kind's tables, one after the other
    (`station schema --report --markdown`)."""
    return "\n\n".join(tables(report_model()).values()) + "\n"
