"""No import cycles in the worker library: a module never needs, even from inside a function, a module
that needs it. Read from the source (``ast``), so a cycle fails here before it fails at import time.

What counts as ``a`` needing ``b``: any ``import`` or ``from … import`` of ``b`` in ``a`` (module level
or function-local; ``if TYPE_CHECKING:`` blocks excepted, they never run), the packages above ``b``
that ``a`` is not inside (Python runs them first), and the job modules the registry imports by name
(``qoelab.jobs.BUILT_IN``). ``"module:function"`` references in a job type's declaration are not
imports: the registry's readers resolve them after every job module is loaded.
"""

from __future__ import annotations

import ast
from pathlib import Path

import qoelab

ROOT = Path(qoelab.__file__).parent


def modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for n in ast.walk(node)}
    return skip


def _with_parents(name: str, importer: str, known: dict[str, Path]) -> set[str]:
    """``name`` and the packages above it that ``importer`` is not inside."""
    parts = name.split(".")
    found = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return {m for m in found if m in known and m != importer and not importer.startswith(m + ".")}


def needs(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                out |= _with_parents(alias.name, name, known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, *([node.module] if node.module else [])])
            subs = {f"{base}.{a.name}" for a in node.names} & known.keys()
            for sub in subs:
                out |= _with_parents(sub, name, known)
            if len(subs) < len(node.names):  # names defined in ``base`` itself
                out |= _with_parents(base, name, known) | ({base} & known.keys() - {name})
    if name == "qoelab.jobs":
        from qoelab.jobs import BUILT_IN

        out |= {f"qoelab.jobs.{job}" for job in BUILT_IN}
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp.append(member)
                        if member == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def graph_of(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)
    return {name: needs(name, path, known) for name, path in known.items()}


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
