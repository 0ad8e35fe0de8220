"""The module import graph of simkit/, traces/ and calibrate/: no circles, and the layering holds.

Every `import` / `from ... import` statement counts, at module level and inside functions (a
function-level import that closes a circle is still a circle, only a hidden one). The engine and
the cost model sit below the commands, the report, the what-ifs and validation, and never
import them, directly or through another module.

    python3 tests/unit/test_import_graph.py      # print the circles, if any
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("simkit", "traces", "calibrate")
LOWER = ("simkit.engine", "simkit.costmodel")                  # the layers below ...
UPPER = ("simkit.validation", "simkit.whatif", "simkit.commands", "simkit.report")  # ... these


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the packages (a package is its __init__)."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module a dotted name lives in (the longest known prefix), or None if not ours."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """Our modules that `module` imports anywhere in its file -> the first line doing so."""
    out: dict[str, int] = {}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [_owner(a.name, modules) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:                                     # relative: from . / .. import
                up = package
                for _ in range(node.level - 1):
                    up = up.rpartition(".")[0]
                base = f"{up}.{base}" if base else up
            # `from pkg import sub` imports the submodule when there is one, else pkg itself
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else _owner(base, modules)
                       for a in node.names]
        else:
            continue
        for t in targets:
            if t and t != module:
                out.setdefault(t, node.lineno)
    return out


def import_graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """module -> {imported module: line} over the three packages."""
    modules = module_files(root)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe(graph: dict[str, dict[str, int]], comp: list[str]) -> str:
    """One circle's edges, `a:line -> b`, for the failure message."""
    inside = set(comp)
    return "\n".join(f"  {a}:{line} -> {b}" for a in comp
                     for b, line in sorted(graph[a].items()) if b in inside)


def _in(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_cycle_finder_sees_a_planted_circle_and_nothing_else():
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}, "e": {}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b": 1}, "b": {}}) == []


def test_graph_sees_module_and_function_level_imports():
    graph = import_graph()
    assert "simkit.costmodel.run_conditions" in graph["simkit.validation.run_prediction"]   # module level
    assert "simkit.costmodel.run_conditions" in graph["simkit.engine.pricing"]       # in a function
    assert "traces.sources" in graph["traces.request_caps"]


def test_no_import_circles():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n\n".join(describe(graph, c) for c in found)


def _path_to(graph: dict[str, dict[str, int]], start: str, goal: tuple[str, ...]) -> list[str]:
    """The shortest import chain from `start` to a module under `goal`, or [] when none."""
    parent: dict[str, str] = {start: ""}
    queue = [start]
    for v in queue:
        for w in sorted(graph.get(v, {})):
            if w in parent:
                continue
            parent[w] = v
            if _in(w, goal):
                chain = [w]
                while parent[chain[-1]]:
                    chain.append(parent[chain[-1]])
                return chain[::-1]
            queue.append(w)
    return []


def test_path_finder_follows_imports_through_other_modules():
    graph = {"simkit.engine.x": {"simkit.engine.y": 1}, "simkit.engine.y": {"simkit.report.z": 1}}
    assert _path_to(graph, "simkit.engine.x", UPPER) == [
        "simkit.engine.x", "simkit.engine.y", "simkit.report.z"]
    assert _path_to(graph, "simkit.report.z", LOWER) == []


def test_engine_and_costmodel_never_import_the_layers_above():
    """Neither directly nor through another module."""
    graph = import_graph()
    bad = [" -> ".join(chain) for m in sorted(graph) if _in(m, LOWER)
           for chain in [_path_to(graph, m, UPPER)] if chain]
    assert not bad, "layering broken:\n" + "\n".join(bad)


if __name__ == "__main__":
    g = import_graph()
    for c in cycles(g):
        print(describe(g, c), end="\n\n")
