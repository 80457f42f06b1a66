"""The shape of the house: which package may import which, no import cycles, no private names shared.

Read from the source (ast), not by importing: a cycle that Python happens to tolerate today (an
import inside a function, under `if TYPE_CHECKING:`, a name imported late) is still a cycle here,
and so is an import inside a function that was written to dodge one. docs/layout.md draws the same
rules for people; tests/test_layout_map.py keeps its map of modules true.

- `cluster/` and `worker/` import no Django, and not each other (`portal -> jobs -> {cluster,
  worker}`); they run where Django is not installed (the worker on compute nodes).
- `jobs/` never imports `portal/` (settings are read through django.conf).
- The domain code of `jobs/` (everything but its layers) never imports a layer: the web pages, the
  API, the admin, the management commands, the live sockets' consumers, the ops views.
- No module imports another module's private (`_underscore`) name, or a private module of
  another package: what is shared is named as shared.
- No cycle among all the modules of the four packages, every import counted wherever it is written.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("portal", "jobs", "cluster", "worker")

#: the layers of jobs/: they serve people and machines, and the domain code below them never imports them
LAYERS = ("jobs.web", "jobs.api", "jobs.admin", "jobs.management", "jobs.live.consumers", "jobs.live.routing",
          "jobs.ops.views")
#: modules that wire layers to the domain (Django's app start-up and signal receivers): they may import both
WIRING = ("jobs.apps", "jobs.signals")


def modules(*packages: str) -> dict[str, Path]:
    """{dotted module name: file} of every module of the packages (migrations aside)."""
    out = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """Every import of `path`, anywhere in the file (functions and TYPE_CHECKING blocks too), as
    (the dotted module imported from, [the names imported]); `import a.b` is ("a.b", [])."""
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, [alias.name for alias in node.names]))
    return found


def imported_names(name: str, path: Path) -> set[str]:
    """Every dotted name `path` imports: the modules, and `module.name` for each name (which may be a module)."""
    found = set()
    for base, names in imports(name, path):
        found.add(base)
        found |= {f"{base}.{n}" for n in names}  # `from pkg import module`
    return found


def graph(*packages: str) -> dict[str, set[str]]:
    """{module: the modules of `packages` it imports}."""
    mods = modules(*packages)
    out = {}
    for name, path in mods.items():
        deps = set()
        for imported in imported_names(name, path):
            # the longest module that the import names (`a.b.c` may be a name in `a.b`)
            parts = imported.split(".")
            for n in range(len(parts), 0, -1):
                candidate = ".".join(parts[:n])
                if candidate in mods:
                    if candidate != name:
                        deps.add(candidate)
                    break
        out[name] = deps
    return out


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


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def forbidden_imports(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{path.relative_to(ROOT)} imports {imported}"
            for name, path in modules(package).items()
            for imported in imported_names(name, path) if imported.split(".")[0] in forbidden]


def layer_breaches() -> list[str]:
    """Imports of a layer of jobs/ from its domain code."""
    bad = []
    for name, deps in graph("jobs").items():
        if within(name, LAYERS) or within(name, WIRING):
            continue
        bad += [f"{name} imports {dep}" for dep in sorted(deps) if within(dep, LAYERS)]
    return bad


def private_imports(*packages: str) -> list[str]:
    """`from a.b import _name` across modules, and private modules (`pkg/_mod.py`) imported from
    outside their package."""
    mods = modules(*packages)
    bad = []
    for name, path in mods.items():
        own_package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for base, names in imports(name, path):
            for target in [base] + [f"{base}.{n}" for n in names if f"{base}.{n}" in mods]:
                last = target.rpartition(".")[2]
                if target in mods and last.startswith("_") and not last.startswith("__"):
                    if target.rpartition(".")[0] != own_package:
                        bad.append(f"{name} imports the private module {target}")
            if base == name:
                continue
            bad += [f"{name} imports {base}.{n}" for n in names
                    if n.startswith("_") and not n.startswith("__") and f"{base}.{n}" not in mods]
    return bad


@pytest.mark.parametrize("package, forbidden", [
    ("cluster", ("django", "channels", "rq", "django_rq", "jobs", "portal", "worker")),
    ("worker", ("django", "channels", "rq", "django_rq", "jobs", "portal", "cluster")),
    ("jobs", ("portal",)),
])
def test_each_package_imports_only_downwards(package, forbidden):
    bad = forbidden_imports(package, forbidden)
    assert not bad, "\n".join(bad)


def test_the_domain_code_of_jobs_imports_none_of_its_layers():
    bad = layer_breaches()
    assert not bad, "\n".join(bad)


def test_no_module_imports_a_private_name_of_another():
    bad = private_imports(*PACKAGES)
    assert not bad, "\n".join(bad)


def test_it_has_no_import_cycle_anywhere():
    cycle = find_cycle(graph(*PACKAGES))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# The checks above are only as good as these: each finds what it is for when it is planted.

def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A tree of its own for the checks, written file by file."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)

    def write(rel: str, text: str = "") -> None:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(tmp_path).parents:
            if str(parent) != "." and not (tmp_path / parent / "__init__.py").exists():
                (tmp_path / parent / "__init__.py").write_text("")
        path.write_text(text)
    return write


def test_it_sees_cycles_through_function_level_and_type_checking_imports(planted):
    planted("pkg/a.py", "def f():\n    from pkg import b\n")
    planted("pkg/b.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n")
    assert find_cycle(graph("pkg")) == ["pkg.a", "pkg.b", "pkg.a"]


def test_it_sees_a_cycle_across_packages(planted):
    planted("one/a.py", "import two.b\n")
    planted("two/b.py", "from one.a import x\n")
    assert find_cycle(graph("one", "two")) == ["one.a", "two.b", "one.a"]


def test_it_sees_the_domain_importing_a_layer(planted):
    planted("jobs/job/start.py", "def f():\n    from jobs.web.templatetags.quota import plain\n")
    planted("jobs/web/templatetags/quota.py", "from jobs.job.start import f\n")
    planted("jobs/signals.py", "from jobs.web.templatetags.quota import plain\n")  # wiring: allowed
    assert layer_breaches() == ["jobs.job.start imports jobs.web.templatetags.quota"]


def test_it_sees_a_private_name_shared(planted):
    planted("pkg/notes.py", "def _send(): pass\n")
    planted("pkg/hooks.py", "from pkg.notes import _send, __doc__\nfrom pkg import _wire\n")
    planted("pkg/_wire.py")
    planted("other/user.py", "from pkg._wire import x\n")
    assert sorted(private_imports("pkg", "other")) == ["other.user imports the private module pkg._wire",
                                               "pkg.hooks imports pkg.notes._send"]


def test_it_sees_jobs_importing_portal(planted):
    planted("jobs/audit.py", "def f():\n    from portal.logs import current\n")
    assert sorted(forbidden_imports("jobs", ("portal",))) == ["jobs/audit.py imports portal.logs",
                                                              "jobs/audit.py imports portal.logs.current"]
