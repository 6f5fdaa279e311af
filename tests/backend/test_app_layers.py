"""The backend apps stand in the declared floors (qoelab_web.layers): no import points up, and the
backend has no import cycle. Read from the source, function-local imports included."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from fixtures.imports import cycles, modules, needs
from qoelab_web.layers import FLOORS, floor_of

BACKEND = Path(__file__).resolve().parents[2] / "backend"


def backend_graph() -> dict[str, set[str]]:
    roots = [BACKEND / f for f in FLOORS if (BACKEND / f / "__init__.py").exists()]
    known = modules(*roots)
    return {name: needs(name, path, known) for name, path in known.items()}


def upward(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(importing module, the higher floor it needs) for every import that points up."""
    rank = {f: i for i, f in enumerate(FLOORS)}
    out = set()
    for importer, needed in graph.items():
        floor = floor_of(importer)
        for module in needed:
            other = floor_of(module)
            if floor and other and rank[other] > rank[floor]:
                out.add((importer, other))
    return out


def test_no_backend_import_points_up_a_floor() -> None:
    found = sorted(upward(backend_graph()))
    assert not found, "imports that point up a floor (qoelab_web.layers):\n" + "\n".join(
        f"{a} -> {b}" for a, b in found
    )


MODEL_LABEL = re.compile(r"^([a-z_]+)\.[A-Z]\w*$")  # "ratings.Campaign", as a ForeignKey names a model


def model_lookups_up(name: str, path: Path) -> set[tuple[str, str]]:
    """(module, higher floor) for each model it reaches by name instead of by import: an
    ``"app.Model"`` label or ``apps.get_model("app", …)`` / ``apps.is_installed("app")``."""
    floor = floor_of(name)
    rank = {f: i for i, f in enumerate(FLOORS)}
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        named: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODEL_LABEL.match(node.value):
            named.append(node.value.split(".")[0])
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("get_model", "is_installed"):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                named.append(first.value.split(".")[0])
        out |= {(name, app) for app in named if floor and app in rank and rank[app] > rank[floor]}
    return out


def test_no_model_is_reached_by_name_up_a_floor() -> None:
    roots = [BACKEND / f for f in FLOORS if (BACKEND / f / "__init__.py").exists()]
    found = sorted(
        hit
        for name, path in modules(*roots).items()
        if ".migrations." not in name
        for hit in model_lookups_up(name, path)
    )
    assert not found, "models of a higher floor reached by name:\n" + "\n".join(
        f"{a} -> {b}" for a, b in found
    )


def test_the_backend_has_no_import_cycle() -> None:
    graph = backend_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" ; ".join(c) for c in found)


def test_the_check_sees_a_function_local_upward_import(tmp_path: Path) -> None:
    for app in ("hosts", "ratings"):
        (tmp_path / app).mkdir()
        (tmp_path / app / "__init__.py").write_text("")
    (tmp_path / "ratings" / "live.py").write_text("X = 1\n")
    (tmp_path / "hosts" / "views.py").write_text("def f():\n    from ratings import live\n")
    known = modules(tmp_path / "hosts", tmp_path / "ratings")
    graph = {name: needs(name, path, known) for name, path in known.items()}
    assert upward(graph) == {("hosts.views", "ratings")}
    (tmp_path / "hosts" / "models.py").write_text(
        'from django.apps import apps\nC = apps.get_model("ratings", "X")\n'
    )
    assert model_lookups_up("hosts.models", tmp_path / "hosts" / "models.py") == {("hosts.models", "ratings")}
