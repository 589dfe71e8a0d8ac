"""Imports follow the flow: source -> table -> plan -> records -> engine -> dataset -> load.

The graph is read from the source with `ast`, and it holds every import of our own
package wherever it stands: at module level, inside a function or method (the lazy
kind), and under `if TYPE_CHECKING:`. A lazy import still makes a dependency: it runs
the first time the function is called, and a reader that imports the writer lazily
still loads the writer. Absolute (`tfrecorder.x`, `from tfrecorder import x`) and
relative (`from . import x`) imports count alike, and `from tfrecorder.sources import
csv` is an import of the module `sources.csv` when that file exists. A package's
`__init__.py` is the module named by the package (`engines`, and `tfrecorder` for the
root). Importing `sources.csv` also runs `sources/__init__.py` (and `tfrecorder/__init__`,
which imports the whole public API); that implicit edge to a parent package is not
counted, and neither is an import of a package the module is inside (`import tfrecorder`
in `engines/shipping.py`, `from tfrecorder.write.engines import Engine` in `engines/local.py`):
Python ran that `__init__` before the module, so the import loads nothing new. Counted,
the root's would tie every module to every other.

The rules, and why:
- No import circles among our modules, at any level (`ALLOWED_CIRCLES` names the
  deliberate ones): a circle means two modules are one concern split in two, and one of
  its imports runs half-initialised the day someone moves it to module level.
  `TYPE_CHECKING` imports count here too: a type named back up the flow is a dependency
  back up the flow, even if it never runs.
- The folders are the flow's wings (docs/design.md): `read/` (load, verify, info, ...)
  never reaches `write/` or `sources/`, at any level: reading a dataset needs the
  manifest, not the Pillow, pandas and planning the writer brings, and the two sides
  must change independently. `format/`, the on-disk contract both read, reaches none of
  `read/`, `write/`, `sources/` or `legacy/`.
- Planning never loads Pillow: `plan` neither reaches `records` nor imports PIL.
- TFRecorder 2.0 is behind one door: its spellings are translated at the public edge
  (`EDGE`: the package's functions, the accessor, the command line, and 2.0's own module
  names), and no other module imports `legacy/`. `manifest`, the contract every reader
  and writer stands on, reaches none of it at any level: 2.0's hint on a folder without
  a manifest comes in through a hook `legacy/` registers.
- Worker code (imported by every worker process) loads neither TensorFlow nor Beam when
  it is imported, so workers start fast: what counts is what runs at import, through
  every module of ours imported at module level. Functions may import them lazily, as
  they may any other package (`manifest`'s TensorFlow parse forms, the Beam engine that
  `engines.engine_for` loads for `runner=`): a worker never calls those.

There are no exceptions beyond `ALLOWED_CIRCLES`: a break fails the test with the import
lines (file:line) that make it, so the message says which import to move.
"""

import ast
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "tfrecorder"

# The wings, as patterns (docs/design.md): the writer is the input side and the write
# side; the readers are the read side; the format is the on-disk contract both share.
WRITER = ("sources", "sources.*", "write", "write.*")
READ = ("read", "read.*")
FORMAT = ("format", "format.*")
# Worker code: imported by every worker process, so neither TensorFlow nor Beam. Every
# name must exist: a rename must update this list, not silently drop a module from it.
WORKER = {"write.records", "format.tfrecord", "storage.fs", "format.example",
          "write.prefetch", "write.engines.local", "write.plan", "sources.table",
          "sources.schema", "write.finish", "write.output", "write.resume", "write.convert",
          "format.manifest", "options", "write.rows", "write.statistics",
          "write.planned_table", "option_checks", "run_options"}
HEAVY = {"tensorflow", "apache_beam"}
# Where 2.0's spellings are translated: the root (`tfrecorder.load`, ...), the accessor,
# the command line, and `types` and `input_schema`, 2.0's module names.
EDGE = {"tfrecorder", "accessor", "cli", "types", "input_schema"}
# verify decodes records (with Pillow and libjpeg-turbo) only when asked (a lazy import
# of verify_records), and verify_records reports through verify's types.
ALLOWED_CIRCLES = {frozenset({"read.verify", "read.verify_records"})}

# When an import runs: with its module, when a function is called, or never.
AT_IMPORT, IN_A_FUNCTION, TYPE_ONLY = "at import", "in a function", "if TYPE_CHECKING"
RUNS = {AT_IMPORT, IN_A_FUNCTION}


@dataclass(frozen=True)
class Import:
    """One name imported by one statement: `name` is our module's short name when `ours`,
    else the top-level package (`tensorflow`)."""

    module: str
    name: str
    ours: bool
    when: str
    where: str  # path:line

    def __str__(self) -> str:
        return f"{self.where}: {self.module} -> {self.name} ({self.when})"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(nodes: Iterable[ast.AST], when: str) -> Iterator[tuple[ast.stmt, str]]:
    """Every import statement under `nodes`, with when it runs."""
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, when
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _statements(node.body, TYPE_ONLY)
            yield from _statements(node.orelse, when)
        else:
            inner = when
            if when == AT_IMPORT and isinstance(
                    node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inner = IN_A_FUNCTION
            yield from _statements(ast.iter_child_nodes(node), inner)


def _full_names(package: Path) -> dict[str, Path]:
    """Dotted name (`tfrecorder.write.engines.local`, `tfrecorder` for the root) -> its file."""
    names = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _short(full: str, root: str) -> str:
    return full.removeprefix(root + ".")


def _targets(statement: ast.stmt, full: str, is_package: bool,
             files: dict[str, Path]) -> Iterator[str]:
    """The dotted names one import statement in module `full` imports."""
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            # `import a.b.c` runs a, a.b and a.b.c: the deepest that exists is the edge
            parts = alias.name.split(".")
            yield next((".".join(parts[:n]) for n in range(len(parts), 0, -1)
                        if ".".join(parts[:n]) in files), alias.name)
        return
    base = statement.module or ""
    if statement.level:  # relative: from the package this file is (in)
        anchor = full.split(".")
        anchor = anchor[:len(anchor) - statement.level + is_package]
        base = ".".join(anchor + ([base] if base else []))
    for alias in statement.names:
        submodule = f"{base}.{alias.name}"
        yield submodule if submodule in files else base


@cache
def imports(package: Path = PACKAGE) -> dict[str, tuple[Import, ...]]:
    """Module (short name: `load`, `engines.local`) -> every import it makes, one per
    module named on each line."""
    root, files = package.name, _full_names(package)
    graph = {}
    for full, path in files.items():
        found = {}
        for statement, when in _statements(ast.parse(path.read_text()).body, AT_IMPORT):
            for target in _targets(statement, full, path.name == "__init__.py", files):
                ours = target == root or target.startswith(root + ".")
                if ours and full.startswith(target + "."):
                    continue  # its own package: the parent edge, which is not counted
                edge = Import(module=_short(full, root),
                              name=_short(target, root) if ours else target.split(".")[0],
                              ours=ours, when=when,
                              where=f"{path.relative_to(package.parent)}:{statement.lineno}")
                found[edge] = None
        graph[_short(full, root)] = tuple(found)
    return graph


def _routes(module: str, whens: set[str], package: Path) -> dict[str, tuple[Import, ...]]:
    """Each module of ours `module` reaches by imports that run `whens`, with the chain of
    imports that first reaches it (breadth first: a shortest one)."""
    graph, routes, todo = imports(package), {}, [(module, ())]
    while todo:
        here, chain = todo.pop(0)
        for edge in graph.get(here, ()):
            if edge.ours and edge.when in whens and edge.name not in routes:
                routes[edge.name] = (*chain, edge)
                todo.append((edge.name, routes[edge.name]))
    return routes


def circles(package: Path = PACKAGE) -> dict[frozenset[str], list[Import]]:
    """Each set of modules that import each other (a strongly connected component), with
    the imports among them. TYPE_CHECKING imports count."""
    every = RUNS | {TYPE_ONLY}
    graph = imports(package)
    reach = {module: set(_routes(module, every, package)) for module in graph}
    found = {}
    for module in graph:
        if module in reach[module]:
            members = frozenset({module} | {other for other in reach[module]
                                            if module in reach[other]})
            found[members] = [edge for member in sorted(members) for edge in graph[member]
                              if edge.ours and edge.name in members]
    return found


def loads(module: str, packages: set[str], package: Path = PACKAGE) -> list[tuple[Import, ...]]:
    """The import chains by which importing `module` loads one of `packages`: its
    module-level imports, and those of every module of ours it imports at module level."""
    graph = imports(package)
    found = []
    for other, chain in {module: (), **_routes(module, {AT_IMPORT}, package)}.items():
        found += [(*chain, edge) for edge in graph.get(other, ())
                  if edge.name in packages and not edge.ours and edge.when == AT_IMPORT]
    return found


def in_wing(patterns: tuple[str, ...], package: Path = PACKAGE) -> set[str]:
    return {module for module in imports(package)
            if any(fnmatch(module, pattern) for pattern in patterns)}


def writer(package: Path = PACKAGE) -> set[str]:
    return in_wing(WRITER, package)


def breaks(package: Path = PACKAGE) -> list[tuple[Import, ...]]:
    """Chains by which a reader reaches the writer (blamed on the import that leaves the
    readers) or planning reaches records or Pillow."""
    every, graph, writes = RUNS | {TYPE_ONLY}, imports(package), writer(package)
    readers = in_wing(READ, package)
    found = []
    for reader in sorted(readers):
        for edge in graph[reader]:
            if edge.ours and edge.name not in readers:
                routes = {edge.name: ()} | _routes(edge.name, every, package)
                hit = next((name for name in sorted(routes) if name in writes), None)
                if hit:
                    found.append((edge, *routes[hit]))
    plan = _routes("write.plan", every, package)
    if "write.records" in plan:
        found.append(plan["write.records"])
    return found + loads("write.plan", {"PIL"}, package)


def _lines(chains: Iterable[tuple[Import, ...]]) -> str:
    return "\n".join("  " + "\n    then ".join(map(str, chain)) for chain in chains)


def test_the_parser_sees_the_package():
    graph = imports()
    assert {"tfrecorder", "write.convert", "write.records", "write.engines",
            "write.engines.local", "read.load"} <= set(graph)
    named = {module: {(edge.name, edge.when) for edge in edges}
             for module, edges in graph.items()}
    assert ("write.records", AT_IMPORT) in named["write.engines.local"]
    assert ("read.verify_records", IN_A_FUNCTION) in named["read.verify"]
    assert ("_tensorflow", AT_IMPORT) in named["read.load"]
    assert ("tensorflow", IN_A_FUNCTION) in named["_tensorflow"]
    assert ("write.plan", TYPE_ONLY) in named["write.engines"]


def test_every_import_of_ours_names_a_module():
    graph = imports()
    missing = [edge for edges in graph.values() for edge in edges
               if edge.ours and edge.name not in graph]
    assert not missing, "imports of modules that do not exist:\n" + _lines(
        (edge,) for edge in missing)


def test_the_lists_name_modules_that_exist():
    graph = imports()
    assert set(graph) >= WORKER, f"renamed? update WORKER: {sorted(WORKER - set(graph))}"
    assert {"read.load", "read.reader", "read.verify"} <= in_wing(READ)
    assert {"write.plan", "write.records", "sources.csv"} <= writer()
    assert {"format.manifest", "format.layouts"} <= in_wing(FORMAT)


def test_no_import_circles():
    found = {members: edges for members, edges in circles().items()
             if members not in ALLOWED_CIRCLES}
    assert not found, "import circles; move one of these imports:\n" + "\n".join(
        f"circle {' <-> '.join(sorted(members))}:\n" + _lines((edge,) for edge in edges)
        for members, edges in sorted(found.items(), key=lambda item: sorted(item[0])))


def test_the_allowed_circles_still_exist():
    assert set(circles()) >= ALLOWED_CIRCLES, "fixed: delete it from ALLOWED_CIRCLES"


def test_readers_never_reach_the_writer_and_planning_never_loads_pillow():
    found = breaks()
    assert not found, "imports against the flow:\n" + _lines(found)


def test_the_format_reaches_neither_side():
    """format/ is the contract both sides read: it imports neither read/, write/ nor
    sources/ (nor 2.0's legacy/), at any level."""
    every, outside = RUNS | {TYPE_ONLY}, (*WRITER, *READ, "legacy", "legacy.*")
    found = [chain for module in sorted(in_wing(FORMAT))
             for name, chain in _routes(module, every, PACKAGE).items()
             if any(fnmatch(name, pattern) for pattern in outside)]
    assert not found, "format/ reaches another wing:\n" + _lines(found)


def test_tensorflow_is_imported_in_one_place():
    """`_tensorflow.tensorflow()`, which keeps its start-up lines quiet; migrate's
    `tensorflow.core...` protocol buffers come after a call to it."""
    found = sorted(str(edge) for module, edges in imports().items() for edge in edges
                   if edge.name == "tensorflow" and module not in ("_tensorflow",
                                                                   "legacy.migration"))
    assert not found, "import TensorFlow through tfrecorder._tensorflow:\n" + "\n".join(found)


def _is_legacy(module: str) -> bool:
    return module == "legacy" or module.startswith("legacy.")


def test_tfrecorder_2_is_behind_one_door():
    found = sorted(str(edge) for module, edges in imports().items() for edge in edges
                   if edge.ours and _is_legacy(edge.name)
                   and not _is_legacy(module) and module not in EDGE)
    assert not found, ("only the public edge imports legacy/; translate 2.0's spellings "
                       "there:\n" + "\n".join(found))


def test_the_manifest_reaches_nothing_of_tfrecorder_2():
    every = RUNS | {TYPE_ONLY}
    found = [chain for name, chain in _routes("format.manifest", every, PACKAGE).items()
             if _is_legacy(name)]
    assert not found, "manifest reaches legacy/:\n" + _lines(found)


@pytest.mark.parametrize("module", sorted(WORKER))
def test_worker_code_imports_neither_tensorflow_nor_beam(module):
    assert module in imports(), f"{module} does not exist: update WORKER"
    found = loads(module, HEAVY)
    assert not found, f"{module} loads {HEAVY}:\n" + _lines(found)


def test_the_rules_on_a_package_made_for_them(tmp_path):
    """Each kind of import is seen, by a package small enough to know every edge of."""
    files = {
        "__init__.py": '"""The root."""\n',
        "a.py": "from . import b\nimport os\n",
        "b.py": "def f():\n    from pkg.sub import mod, name\n",
        "sub/__init__.py": "name = 1\n",
        "sub/mod.py": "import pkg.a\nfrom ..c import x\nfrom . import name\n",
        "c.py": "import tensorflow as tf\nimport pkg\nx = 1\n",
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from pkg import a\nclass D:\n    def m(self):\n"
                "        import tensorflow\n        from .e import y\n",
        "e.py": "from pkg.d import D\ny = 2\n",
    }
    for name, text in files.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(textwrap.dedent(text))
    package = tmp_path / "pkg"
    # `import pkg` in c and `from . import name` (sub's) in sub.mod: their own packages

    edges = {module: {(edge.name, edge.when) for edge in found}
             for module, found in imports(package).items()}
    assert edges == {
        "pkg": set(),
        "a": {("b", AT_IMPORT), ("os", AT_IMPORT)},
        "b": {("sub.mod", IN_A_FUNCTION), ("sub", IN_A_FUNCTION)},
        "sub": set(),
        "sub.mod": {("a", AT_IMPORT), ("c", AT_IMPORT)},
        "c": {("tensorflow", AT_IMPORT)},
        "d": {("typing", AT_IMPORT), ("a", TYPE_ONLY), ("tensorflow", IN_A_FUNCTION),
              ("e", IN_A_FUNCTION)},
        "e": {("d", AT_IMPORT)},
    }
    assert set(circles(package)) == {frozenset({"a", "b", "sub.mod"}), frozenset({"d", "e"})}
    assert [str(edge) for edge in circles(package)[frozenset({"d", "e"})]] == [
        f"pkg/d.py:7: d -> e ({IN_A_FUNCTION})", f"pkg/e.py:1: e -> d ({AT_IMPORT})"]
    # a reaches c only lazily (b imports sub.mod in a function): importing a loads no
    # TensorFlow, while importing sub.mod does, through c at module level; d's own lazy
    # import of TensorFlow runs only when its method is called
    assert loads("a", HEAVY, package) == []
    assert [[edge.name for edge in chain] for chain in loads("sub.mod", HEAVY, package)] == [
        ["c", "tensorflow"]]
    assert loads("d", HEAVY, package) == [] and loads("e", HEAVY, package) == []
