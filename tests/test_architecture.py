"""The shape of the house: which package may import which, and no import cycles.

Read from the source (ast), not by importing: a cycle that Python happens to tolerate today (an
import inside a function, a name imported late) is still a cycle here, and so is an import inside
a function that was written to dodge one.

- `cluster/` and `worker/` import no Django, and not each other (docs/layout.md: `portal -> jobs ->
  {cluster, worker}`); they run where Django is not installed (the worker on compute nodes).
- Inside `jobs/`, modules form no cycle, counting every import wherever it is written.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def modules(package: str) -> dict[str, Path]:
    """{dotted module name: file} of every module of `package`."""
    out = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imported_names(name: str, path: Path) -> set[str]:
    """Every dotted name `path` imports, anywhere in the file (functions and TYPE_CHECKING blocks too)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}  # `from pkg import module`
    return found


def internal_graph(package: str) -> dict[str, set[str]]:
    mods = modules(package)
    graph = {}
    for name, path in mods.items():
        deps = set()
        for imported in imported_names(name, path):
            # the longest module of the package that the import names (`a.b.c` may be a name in `a.b`)
            parts = imported.split(".")
            for n in range(len(parts), 0, -1):
                candidate = ".".join(parts[:n])
                if candidate in mods:
                    if candidate != name:
                        deps.add(candidate)
                    break
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of modules (first == last), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = dict.fromkeys(graph, WHITE)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        color[node] = GREY
        stack.append(node)
        for dep in sorted(graph[node]):
            if color[dep] == GREY:
                return stack[stack.index(dep):] + [dep]
            if color[dep] == WHITE:
                cycle = visit(dep)
                if cycle:
                    return cycle
        stack.pop()
        color[node] = BLACK
        return None

    for node in sorted(graph):
        if color[node] == WHITE:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


@pytest.mark.parametrize("package, forbidden", [
    ("cluster", ("django", "channels", "rq", "django_rq", "jobs", "portal", "worker")),
    ("worker", ("django", "channels", "rq", "django_rq", "jobs", "portal", "cluster")),
])
def test_it_keeps_cluster_and_worker_free_of_django(package, forbidden):
    bad = []
    for name, path in modules(package).items():
        for imported in imported_names(name, path):
            if imported.split(".")[0] in forbidden:
                bad.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert not bad, "\n".join(bad)


def test_it_has_no_import_cycle_inside_jobs():
    cycle = find_cycle(internal_graph("jobs"))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    # The check above is only as good as this: a graph with a cycle is reported, one without is not.
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_import_reader_sees_imports_inside_functions(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg import b\n")
    (pkg / "b.py").write_text("from .a import f\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert find_cycle(internal_graph("pkg")) == ["pkg.a", "pkg.b", "pkg.a"]
