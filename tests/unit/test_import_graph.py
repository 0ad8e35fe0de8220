"""The module import graph of simkit/, traces/ and calibrate/: no circles, and the layering holds.

Every `import` / `from ... import` statement counts, at module level and inside functions (a
function-level import that closes a circle is still a circle, only a hidden one). LAYERS lists
the layers from the top down (docs/architecture.md draws the same): a module may import its own
layer or any layer below, never one above, so no arrow runs back up.

    python3 tests/unit/test_import_graph.py      # print the circles, if any
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("simkit", "traces", "calibrate")
# Top first. A module belongs to the layer of its longest matching prefix; "simkit" alone holds
# the loose leaf modules (errors, paths, checks, history, block_hash, record_schema, ...).
LAYERS = (
    ("entry", ("simkit.__main__", "simkit.cli")),
    ("commands", ("simkit.commands",)),
    ("calibration harness", ("calibrate",)),
    ("questions", ("simkit.whatif", "simkit.reference", "simkit.validation", "simkit.fleet",
                   "simkit.executors")),
    ("renderings", ("simkit.report",)),
    ("application", ("simkit.app",)),
    ("simulator", ("simkit.engine",)),
    ("workload profiles", ("simkit.profiles",)),
    ("tables and step cost", ("simkit.acceptance", "simkit.costmodel", "simkit.serving_checks")),
    ("drafters, catalogues, traces", ("simkit.drafters", "simkit.catalog", "traces")),
    ("leaves", ("simkit",)),
)


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


def layer_of(module: str) -> int:
    """The index in LAYERS (0 = top) of the layer a module belongs to."""
    best, depth = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > depth:
                best, depth = i, len(p)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return best


def upward_arrows(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every import from a lower layer to a higher one, `a:line -> b (layer -> layer)`."""
    return [f"{a}:{line} -> {b} ({LAYERS[layer_of(a)][0]} -> {LAYERS[layer_of(b)][0]})"
            for a in sorted(graph) for b, line in sorted(graph[a].items())
            if layer_of(b) < layer_of(a)]


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


def test_layer_check_sees_a_planted_upward_arrow_and_nothing_else():
    graph = {"simkit.engine.sim": {"simkit.errors": 3, "simkit.app.predict": 7},
             "simkit.app.predict": {"simkit.engine.sim": 1}, "simkit.errors": {}}
    assert upward_arrows(graph) == [
        "simkit.engine.sim:7 -> simkit.app.predict (simulator -> application)"]
    assert layer_of("simkit.block_hash") == len(LAYERS) - 1          # a loose module: a leaf
    assert layer_of("simkit.profiles.sampling") < layer_of("simkit.block_hash")


def test_every_module_has_a_layer():
    for module in import_graph():
        layer_of(module)


def test_no_arrow_runs_back_up():
    """LAYERS top-down: no module imports a layer above its own, not even inside a function."""
    bad = upward_arrows(import_graph())
    assert not bad, "imports that run back up (fix the import or move the module):\n" + "\n".join(bad)


if __name__ == "__main__":
    g = import_graph()
    for c in cycles(g):
        print(describe(g, c), end="\n\n")
    print("\n".join(upward_arrows(g)))
