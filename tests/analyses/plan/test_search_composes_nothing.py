"""Issue 33, "One kernel": search-only code enumerates and ranks; it composes nothing. By import analysis
of ``src/``: of the modules ``commcost.analyses.plan.search`` imports (at any depth, lazy imports inside
functions included, ``if TYPE_CHECKING:`` blocks not) that ``commcost.analyses.plan.plan`` does not,
none may call a function of ``commcost.workload``, ``commcost.parallel`` or
``commcost.analyses.plan.compose`` (constructing a typed input, a class, is not composing).

:data:`STILL_COMPOSING` lists the search-only modules that still do, each with what it restates: the
second composition issue 33 deletes. The list may only shrink: a module on it that no longer calls one fails
the test too, so it comes off when it is fixed. The checker is shown to fail on a made-up tree.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

PACKAGE = "commcost"
COMPOSERS = ("commcost.workload", "commcost.parallel", "commcost.analyses.plan.compose")
"""Modules (and packages) whose functions compose a step; search-only code may not call them."""

STILL_COMPOSING = {
    "commcost.analyses.plan.grid": "the collectives of every row (sizes, counts, placement) priced as columns, and "
                                   "one micro-batch's compute on columns; the step is kernel.py's, plan's too",
    "commcost.analyses.plan.grid_memory": "the memory of every row: memory_per_gpu's parts wired again on columns "
                                          "(the verdicts are MemoryBreakdown's own rules: device_bytes_range, "
                                          "fits_on_card, memory_fragile)",
    "commcost.analyses.plan.space": "enumeration's rules: stacks.layout_runs/auto_masks on columns (plan resolves "
                                    "auto through the same auto_masks, refuses a named stack's layout through "
                                    "stack_refuses/layout_runs in the CLI), layout.expert_data_parallel; auto's parts "
                                    "(stack_refuses, recipe_tp_comm_overlap)",
}
"""Search-only modules that still call a composer, and what: the remainder of issue 33's "One kernel". The
list may only shrink (a module's count of calls is no measure: calling a shared rule instead of restating it
adds one)."""


def _module_name(path: Path, src: Path) -> str:
    rel = path.relative_to(src).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(tree: ast.AST):
    """``ImportFrom``/``Import`` nodes of ``tree`` outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def parse_tree(src: Path) -> dict[str, ast.Module]:
    """Every module of the package under ``src`` by dotted name."""
    return {_module_name(p, src): ast.parse(p.read_text(encoding="utf-8")) for p in sorted((src / PACKAGE).rglob("*.py"))}


def imported_modules(modules: dict[str, ast.Module], name: str) -> dict[str, str]:
    """``{dotted name: alias-free target}`` of the package modules ``name`` imports directly: ``from a.b import
    c`` counts ``a.b.c`` if it is a module, else ``a.b``."""
    out = set()
    for node in _imports(modules[name]):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif node.module and node.module.startswith(PACKAGE):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.add(full if full in modules else node.module)
    return {m: m for m in out if m in modules}


def closure(modules: dict[str, ast.Module], root: str) -> set[str]:
    """The modules ``root`` imports at any depth, itself included (each package's ``__init__`` on the way
    is imported too, as Python does)."""
    seen, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in seen or name not in modules:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        todo.extend(imported_modules(modules, name))
    return seen


def _composer(module: str) -> bool:
    return any(module == c or module.startswith(c + ".") for c in COMPOSERS)


def composer_calls(modules: dict[str, ast.Module], name: str) -> list[str]:
    """``module.function`` of every call in ``name`` to a function (lower-case name) of :data:`COMPOSERS`."""
    funcs, aliases = {}, {}
    for node in _imports(modules[name]):
        if isinstance(node, ast.ImportFrom) and node.module and _composer(node.module):
            for a in node.names:
                if f"{node.module}.{a.name}" in modules:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                elif a.name[:1].islower():
                    funcs[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _composer(a.name) and a.asname:
                    aliases[a.asname] = a.name
    calls = set()
    for node in ast.walk(modules[name]):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in funcs:
            calls.add(funcs[f.id])
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in aliases \
                and f.attr[:1].islower():
            calls.add(f"{aliases[f.value.id]}.{f.attr}")
    return sorted(calls)


def search_only_composers(modules: dict[str, ast.Module], search: str, plan: str) -> dict[str, list[str]]:
    """``{module: calls}`` of the modules ``search`` imports and ``plan`` does not that call a composer."""
    only = closure(modules, search) - closure(modules, plan)
    return {m: calls for m in sorted(only) if (calls := composer_calls(modules, m))}


def test_search_only_code_composes_nothing_but_the_listed_remainder():
    modules = parse_tree(ROOT / "src")
    found = search_only_composers(modules, "commcost.analyses.plan.search", "commcost.analyses.plan.plan")
    new = sorted(set(found) - set(STILL_COMPOSING))
    assert not new, f"search-only modules that compose (search must only enumerate and rank): {new}: " \
                    f"{[found[m] for m in new]}"
    fixed = sorted(set(STILL_COMPOSING) - set(found))
    assert not fixed, f"no longer composing, take them off STILL_COMPOSING: {fixed}"


def test_the_checker_fails_on_a_made_up_tree(tmp_path):
    """A search that imports a grid calling ``workload.memory.f`` (by name) and ``compose.g`` (by module
    alias) while plan imports neither: both calls are found; a class and a module plan shares are not."""
    pkg = tmp_path / PACKAGE
    for path, text in {
        "__init__.py": "",
        "workload/__init__.py": "",
        "workload/memory.py": "def f(x):\n    return x\n\nclass Row:\n    pass\n",
        "analyses/__init__.py": "",
        "analyses/plan/__init__.py": "",
        "analyses/plan/compose.py": "def g(x):\n    return x\n",
        "analyses/plan/shared.py": "from commcost.workload.memory import f\n\ndef h():\n    return f(1)\n",
        "analyses/plan/plan.py": "from commcost.analyses.plan import shared\n",
        "analyses/plan/grid.py": ("from commcost.workload.memory import Row, f\n"
                                  "import commcost.analyses.plan.compose as K\n"
                                  "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from commcost.analyses.plan import hidden\n"
                                  "def run():\n    Row()\n    return K.g(f(2))\n"),
        "analyses/plan/hidden.py": "from commcost.workload.memory import f\nf(3)\n",
        "analyses/plan/search.py": ("from commcost.analyses.plan import shared\n"
                                    "def go():\n    from commcost.analyses.plan.grid import run\n    return run()\n"),
    }.items():
        (pkg / path).parent.mkdir(parents=True, exist_ok=True)
        (pkg / path).write_text(text, encoding="utf-8")
    modules = parse_tree(tmp_path)
    found = search_only_composers(modules, "commcost.analyses.plan.search", "commcost.analyses.plan.plan")
    assert found == {"commcost.analyses.plan.grid": ["commcost.analyses.plan.compose.g", "commcost.workload.memory.f"]}
