"""No import cycles in the worker library: a module never needs, even from inside a function, a module
that needs it. Read from the source (``ast``), so a cycle fails here before it fails at import time.

What counts as ``a`` needing ``b`` is ``fixtures.imports.needs``, plus the job modules the registry
imports by name (``qoelab.jobs.BUILT_IN``). ``"module:function"`` references in a job type's
declaration are not imports: the registry's readers resolve them after every job module is loaded.
"""

from __future__ import annotations

from pathlib import Path

import qoelab
from fixtures.imports import cycles, modules, needs

ROOT = Path(qoelab.__file__).parent


def graph_of(root: Path = ROOT) -> dict[str, set[str]]:
    from qoelab.jobs import BUILT_IN

    known = modules(root)
    graph = {name: needs(name, path, known) for name, path in known.items()}
    if "qoelab.jobs" in graph:
        graph["qoelab.jobs"] |= {f"qoelab.jobs.{job}" for job in BUILT_IN} & known.keys()
    return graph


def test_the_worker_library_has_no_import_cycle() -> None:
    graph = graph_of()
    found = cycles(graph)
    shown = [" ; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c) for c in found]
    assert not found, "import cycles:\n" + "\n".join(shown)


def test_the_check_finds_a_cycle_through_a_function_local_import(tmp_path: Path) -> None:
    pkg = tmp_path / "qoelab"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from qoelab.sub import a\n")
    (pkg / "sub" / "a.py").write_text("def f():\n    from qoelab import b\n")
    (pkg / "b.py").write_text("from qoelab.sub.a import f\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from qoelab import b\n"
    )
    (pkg / "d.py").write_text("from qoelab.c import x\n")
    found = cycles(graph_of(pkg))
    assert found == [["qoelab.b", "qoelab.sub", "qoelab.sub.a"]]
