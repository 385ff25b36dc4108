"""The shape of the station package (issue 30): imports point down. No module imports one that
imports it back, at any distance, nor do the package's parts (its top-level modules and
subpackages) form a circle; the analysis never reaches for the report, the bench never for the
run kinds, and the parsers and the common pieces (units, formatting, progress counts) stand on
nothing of the station; inside the packages that group the parts by role, modules stand on those
below them only."""

from __future__ import annotations

import pytest

from tests.import_graph import cycle, graph, imports, package_modules

EDGES = graph("station")


def _part(module: str) -> str:
    """station.kinds.module.pairing → analysis; station.bench.bench → bench."""
    return module.split(".")[1] if "." in module else module


def _parts() -> dict[str, set[str]]:
    parts: dict[str, set[str]] = {}
    for module, deps in EDGES.items():
        parts.setdefault(_part(module), set()).update(_part(d) for d in deps if _part(d) != _part(module))
    return parts


def test_the_cycle_finder_finds_a_cycle() -> None:
    # the checks below are only as good as this: a circle at a distance of three is found
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_module_imports_itself_back() -> None:
    found = cycle(EDGES)
    assert found is None, "import cycle: " + " -> ".join(found or [])


def test_the_parts_of_the_station_form_no_circle() -> None:
    found = cycle(_parts())
    assert found is None, "the station's parts import in a circle: " + " -> ".join(found or [])


@pytest.mark.parametrize(("part", "never"), [
    ("analysis", {"report", "kinds", "bench", "capture", "campaign", "api", "cli"}),
    ("report", {"kinds", "bench", "capture", "campaign", "api", "cli"}),
    ("bench", {"kinds", "capture", "campaign", "api", "cli"}),
    ("capture", {"kinds", "campaign", "api", "cli"}),
    ("store", {"analysis", "report", "kinds", "bench", "capture", "campaign", "api", "cli"}),
    ("config", {"analysis", "report", "kinds", "bench", "capture", "store", "campaign", "api", "cli"}),
    ("parsers", set(_parts()) - {"parsers"}),
    ("common", set(_parts()) - {"common"}),
])
def test_no_upward_import(part: str, never: set[str]) -> None:
    upward = sorted(f"{module} imports {dep}" for module, deps in EDGES.items() if _part(module) == part
                    for dep in deps if _part(dep) in never)
    assert upward == []


# Inside the packages that group the station's parts by role, each module stands on those listed
# before it only (the package's __init__ is its face: it may import its own modules)
INSIDE = {
    "station.bench": ["scope_session", "generator_session", "bench", "check", "proposal", "first_look"],
    "station.capture": ["pulses", "accounting", "scope_capture"],
    "station.store": ["manifest", "run_store", "result_store"],
    "station.campaign": ["terminal", "run", "stopping", "live_analysis", "loop"],
    "station.config": ["yaml_lines", "types", "twin", "until", "budgets", "bench", "campaign", "loading",
                       "edit"],
    "station.common": ["units", "formatting", "progress", "lifetime", "lazy_import", "module_names", "cli_help",
                       "cache_dirs", "atomic_file"],
}


def upward_inside(edges: dict[str, set[str]], package: str, order: list[str]) -> list[str]:
    rank = {f"{package}.{name}": i for i, name in enumerate(order)}
    return sorted(f"{module} imports {dep}" for module, deps in edges.items() if module in rank
                  for dep in deps if dep in rank and rank[dep] >= rank[module])


@pytest.mark.parametrize("package", sorted(INSIDE))
def test_no_upward_import_inside_a_package(package: str) -> None:
    listed = {f"{package}.{name}" for name in INSIDE[package]}
    present = {m for m in EDGES if m.startswith(package + ".")}
    assert present <= listed, f"{package}: place {sorted(present - listed)} in INSIDE"
    assert upward_inside(EDGES, package, INSIDE[package]) == []


def test_an_upward_import_inside_a_package_is_found() -> None:
    # the rule above is only as good as this: the run's lifecycle importing the campaign loop is named
    edges = {**EDGES, "station.campaign.run": EDGES["station.campaign.run"] | {"station.campaign.loop"}}
    assert upward_inside(edges, "station.campaign", INSIDE["station.campaign"]) == [
        "station.campaign.run imports station.campaign.loop"]


def test_the_graph_sees_lazy_and_type_only_imports() -> None:
    # a function-level import and a TYPE_CHECKING one are dependencies too: kinds/base.py names
    # Campaign and RunSpec for type checking only, bench.py imports the twin inside a method
    base = package_modules("station")["station.kinds.base"]
    assert ("station.config", ["Campaign", "RunSpec"]) in imports(base, "station")
    assert "station.config" in EDGES["station.kinds.base"]
    assert "station.twin.runner" in EDGES["station.bench.bench"]


def test_the_store_knows_no_run_kind() -> None:
    """The generic store names no kind's files: a module run's tables are kinds/module/data.py's, a
    probe kind's are its own (issue 30: sw.raw and hw_pulses.csv were the store's)."""
    from tests.import_graph import REPO

    source = (REPO / "station" / "store" / "run_store.py").read_text()
    code = source[source.index('"""', 3) + 3:]  # past the module docstring, which may give examples
    named = [f for f in ("sw.raw", "hw_pulses.csv", "sw_arrivals.csv", "twin-truth", "cyclictest", "irqgap",
                         "delays.csv") if f in code]
    assert named == []


def test_the_core_branches_on_no_run_kind() -> None:
    """Issue 30: outside station/kinds/ (and the registry) no code compares anything with a run
    kind's name (`matrix.kind == "gpio"`, `kind in ("module", …)`), and the core imports no kind's
    package: it loops over kind_registry."""
    import ast

    from station import kind_registry
    from tests.import_graph import REPO

    names = set(kind_registry.kinds())
    found = []
    for path in sorted((REPO / "station").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("station/kinds/") or rel == "station/kind_registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                consts = [c.value for s in sides for c in ([s] if isinstance(s, ast.Constant) else
                          getattr(s, "elts", [])) if isinstance(c, ast.Constant)]
                if any(isinstance(c, str) and c in names for c in consts):
                    found.append(f"{rel}:{node.lineno}")
    assert found == []
    # (api.py, the public façade above them, offers a kind's own helpers: pair_events, …)
    core = ("station.config", "station.campaign.loop", "station.campaign.run", "station.bench.bench",
            "station.store.run_store")
    imported = sorted(f"{m} imports {d}" for m in core for d in EDGES.get(m, ())
                      if d.startswith("station.kinds.") and d != "station.kinds.base")
    assert imported == []
