"""The backend apps stand in the declared floors (qoelab_web.layers): no import points up, and the
backend has no import cycle. Read from the source, function-local imports included."""

from __future__ import annotations

from pathlib import Path

from fixtures.imports import cycles, modules, needs
from qoelab_web.layers import FLOORS, floor_of

BACKEND = Path(__file__).resolve().parents[2] / "backend"

# Upward imports still to remove (issue 35). The list only shrinks: a new upward import fails, and so
# does an entry that no longer holds, so the next person deletes it.
STILL_UPWARD = {
    ("experiments.api.serializers", "results"),  # a trial's artifacts in its API answer
    ("experiments.api.views", "results"),  # a sweep's aggregate endpoint
    ("experiments.lifecycle", "results"),  # deleting a sweep counts and removes its artifacts
    ("experiments.lifecycle", "ratings"),  # ... and the rating campaigns built on it
    ("experiments.sweep_spec", "results"),  # a trial:N capture input must have a pcap
}


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
    found = upward(backend_graph())
    new = sorted(found - STILL_UPWARD)
    gone = sorted(STILL_UPWARD - found)
    assert not new, "imports that point up a floor (qoelab_web.layers):\n" + "\n".join(
        f"{a} -> {b}" for a, b in new
    )
    assert not gone, "no longer upward, delete from STILL_UPWARD:\n" + "\n".join(
        f"{a} -> {b}" for a, b in gone
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
