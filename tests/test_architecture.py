"""The package's shape: no import loops and no import from a lower layer up to a higher one (imports inside
functions included), against the layer order written in docs/architecture.md."""

import ast
import re
from pathlib import Path

from .conftest import ROOT

PACKAGE = ROOT / "alphazero_hpc"
DOC = ROOT / "docs" / "architecture.md"


def layer_order() -> list[set[str]]:
    """The layers of the doc's ```layers block, lowest first: each line names the packages of one layer."""
    m = re.search(r"```layers\n(.*?)```", DOC.read_text(), re.S)
    assert m, f"{DOC} has no ```layers block"
    layers = []
    for line in m.group(1).splitlines():
        names = {n.strip() for n in line.split("#")[0].split(",") if n.strip()}
        if names:
            layers.append(names)
    return layers


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every alphazero_hpc module this file imports, at any depth of the file (functions too)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "alphazero_hpc"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "alphazero_hpc":
                continue
            for alias in node.names:  # `from . import x` may name a module
                sub = f"{target}.{alias.name}"
                out.add(sub if _exists(sub) else target)
    return out


def _exists(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) - {module_name(p)} for p in sorted(PACKAGE.rglob("*.py"))}


def unit(module: str) -> str:
    """The layer unit of a module: its top-level package or module inside alphazero_hpc (the package's own
    __init__ is 'alphazero_hpc')."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_every_package_and_top_level_module_has_a_layer():
    named = set().union(*layer_order())
    present = {unit(m) for m in graph()}
    assert present - named == set(), f"not in the layers of {DOC.name}: {sorted(present - named)}"
    assert named - present == set(), f"{DOC.name} names layers that do not exist: {sorted(named - present)}"


def upward_imports(g: dict[str, set[str]], layers: list[set[str]]) -> list[str]:
    """Imports from a package to one of a higher layer, or to another package of its own layer."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    bad = []
    for module, targets in g.items():
        for target in targets:
            a, b = unit(module), unit(target)
            if a != b and rank[b] >= rank[a]:
                bad.append(f"{module} -> {target} ({a} is layer {rank[a]}, {b} is layer {rank[b]})")
    return sorted(bad)


def import_loops(g: dict[str, set[str]]) -> list[str]:
    seen: set[str] = set()
    stack: list[str] = []
    loops: list[str] = []

    def visit(m: str) -> None:
        if m in stack:
            loops.append(" -> ".join(stack[stack.index(m):] + [m]))
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for t in sorted(g.get(m, ())):
            if t in g and t != "alphazero_hpc":  # importing the package's own __init__ (its version) is no loop
                visit(t)
        stack.pop()

    for m in sorted(g):
        visit(m)
    return loops


def test_no_import_goes_up_a_layer_or_sideways_across_packages():
    bad = upward_imports(graph(), layer_order())
    assert not bad, "imports against the layer order of docs/architecture.md:\n" + "\n".join(bad)


def test_no_import_loops():
    loops = import_loops(graph())
    assert not loops, "import loops:\n" + "\n".join(loops)


def test_the_checks_find_what_main_had():
    """On the shape of the code before the folders (store importing the self-play engine, a loop between the
    search pool and the task, search importing torch's net), both checks report it."""
    g = graph()
    g["alphazero_hpc.store.shards"] = g["alphazero_hpc.store.shards"] | {"alphazero_hpc.selfplay.engine"}
    g["alphazero_hpc.selfplay.plan"] = g["alphazero_hpc.selfplay.plan"] | {"alphazero_hpc.selfplay.task"}
    g["alphazero_hpc.search.api"] = g["alphazero_hpc.search.api"] | {"alphazero_hpc.net.inference"}
    bad = upward_imports(g, layer_order())
    assert any(row.startswith("alphazero_hpc.store.shards -> alphazero_hpc.selfplay.engine") for row in bad)
    assert any(row.startswith("alphazero_hpc.search.api -> alphazero_hpc.net.inference") for row in bad)
    assert any("alphazero_hpc.selfplay.plan -> alphazero_hpc.selfplay.task" in loop for loop in import_loops(g))


def test_every_package_says_what_it_owns():
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40, f"{init.relative_to(ROOT)} needs a docstring saying what the package owns"


def map_gaps(package: Path, docstring: str, row: str) -> list[str]:
    """What a package's maps get wrong: a module its docstring or its row of the architecture table leaves out, or
    a name there that looks like a module of the package (a lowercase identifier in backticks) and is not one."""
    modules = {p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")}
    # ``name``, ``name.py``, ``name.Class`` or a bare name.py; in the table `name` or `name.Class`
    named_doc = (set(re.findall(r"``([a-z_][a-z0-9_]*)(?:\.py|\.[A-Z][A-Za-z]*)?``", docstring))
                 | set(re.findall(r"\b([a-z_][a-z0-9_]*)\.py\b", docstring)))
    named_row = set(re.findall(r"(?<!`)`([a-z_][a-z0-9_]*)(?:\.[A-Z][A-Za-z]*)?`(?!`)", row))
    gaps = [f"{package.name}/{m}.py is not named in {package.name}/__init__.py's docstring" for m in sorted(modules - named_doc)]
    gaps += [f"{package.name}/{m}.py is not in {package.name}/'s row of {DOC.name}" for m in sorted(modules - named_row)]
    gaps += [f"{package.name}/__init__.py's docstring names ``{m}``, which is not a module of it" for m in sorted(named_doc - modules)]
    gaps += [f"{DOC.name} names `{m}` in {package.name}/'s row, which is not a module of it" for m in sorted(named_row - modules)]
    return gaps


def package_rows() -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z_]+)/` \| (.*) \|$", DOC.read_text(), re.M)}


def test_every_module_is_on_the_maps():
    """Every module is named in its package's docstring and in its package's row of docs/architecture.md, and
    neither names a module that does not exist."""
    rows = package_rows()
    gaps = []
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        gaps += map_gaps(init.parent, doc, rows.get(init.parent.name, ""))
    assert not gaps, "\n".join(gaps)


def test_the_map_check_finds_a_missing_and_a_stale_module(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name in ("__init__", "alpha", "beta"):
        (pkg / f"{name}.py").write_text("")
    gaps = map_gaps(pkg, "The ``alpha`` part, ``beta.Thing`` and the ``gamma`` part; ``RUN/x/`` and ``x.json`` are no modules.",
                    "`alpha`, `delta`: see `api.Thing`; `pip install -e .`")
    assert gaps == ["pkg/beta.py is not in pkg/'s row of architecture.md",
                    "pkg/__init__.py's docstring names ``gamma``, which is not a module of it",
                    "architecture.md names `api` in pkg/'s row, which is not a module of it",
                    "architecture.md names `delta` in pkg/'s row, which is not a module of it"]
