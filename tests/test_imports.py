"""Imports follow the flow: source -> table -> plan -> records -> engine -> dataset -> load.

Read from the source with `ast` (module-level imports only: an import inside a function
is the lazy kind, made where it is needed). The rules are the design's; `KNOWN` lists
where the code still breaks them, as a ratchet: a new break fails, and so does an entry
that no longer breaks anything (delete it). Issue 13 is to empty it.
"""

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "tfrecorder"

# The writer's modules: readers never need them (nor the Pillow, pandas and planning
# they bring). `fs`, `tfrecord` (framing) and `errors` are shared.
WRITER = {"table", "schema", "plan", "records", "prefetch", "output", "resume", "convert",
          "engines.local", "engines.beam", "engines.shipping", "statistics"}
READERS = {"load", "verify", "verify_records", "inspection", "info", "show", "report"}
# Worker code: imported by every worker process, so neither TensorFlow nor Beam.
WORKER = {"records", "tfrecord", "fs", "example", "prefetch", "engines.local", "plan",
          "table", "schema", "dataset", "output", "resume", "convert", "manifest", "options",
          "rows", "statistics"}
HEAVY = {"tensorflow", "apache_beam"}

KNOWN: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


@cache
def imports() -> dict[str, set[str]]:
    """Module -> the modules (ours by short name, others by top-level package) it imports
    at module level."""
    paths = list(PACKAGE.rglob("*.py"))
    ours = {module_name(path) for path in paths}
    found = {}
    for path in paths:
        names = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "tfrecorder":
                    names |= {alias.name for alias in node.names}
                else:
                    names.add(node.module.removeprefix("tfrecorder."))
            elif isinstance(node, ast.Import):
                names |= {alias.name.removeprefix("tfrecorder.") for alias in node.names}
        found[module_name(path)] = {name if name in ours else name.split(".")[0]
                                    for name in names}
    return found


def reachable(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        for name in imports().get(todo.pop(), ()):
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def breaks() -> set[tuple[str, str]]:
    """(module, what it imports) for every direct import that lets a rule be broken."""
    found = set()
    graph = imports()
    for module, names in graph.items():
        for name in names:
            if module in READERS and name not in READERS and (
                    name in WRITER or reachable(name) & WRITER):
                found.add((module, name))
            if module == "plan" and name == "records":
                found.add((module, name))
    return found


def test_the_parser_sees_the_package():
    graph = imports()
    assert {"convert", "records", "engines.local", "load"} <= set(graph)
    assert "records" in graph["engines.local"] and "fs" in graph["records"]


def test_readers_never_reach_the_writer_and_planning_never_loads_pillow():
    assert breaks() - KNOWN == set(), "new imports against the flow"
    assert KNOWN - breaks() == set(), "fixed: delete these from KNOWN"


@pytest.mark.parametrize("module", sorted(WORKER))
def test_worker_code_imports_neither_tensorflow_nor_beam(module):
    assert not (reachable(module) | imports()[module]) & HEAVY
