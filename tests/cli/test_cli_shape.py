"""The CLI stays thin (STYLE.md item 8; issue 21, "typed inputs"): every subcommand's ``run`` is parse,
resolve, call, render in at most :data:`MAX_RUN_LINES` lines, and the argparse Namespace is read in one
place, the input builder (:mod:`commcost.cli.inputs` and its ``inputs_*`` siblings), which turns it into
frozen inputs in SI units. Counted from the
source with :mod:`ast`: a read is ``args.x`` or ``getattr``/``hasattr``/``vars`` on ``args`` (any
name bound to a parameter called ``args``/``ns`` or annotated ``argparse.Namespace``)."""

from __future__ import annotations

import ast

from conftest import ROOT

CLI = ROOT / "src" / "commcost" / "cli"
MAX_RUN_LINES = 40
MAX_READS_OUTSIDE = 3
BUILDER = "inputs.py"
"""The input builder, the one place that reads the Namespace: ``cli/inputs.py`` and its siblings
``cli/inputs_<concern>.py``, directly in ``cli/`` (``_args.py`` defines the parser and reads none)."""


def exempt(name: str) -> bool:
    """Whether the module ``cli/<name>`` may read the Namespace: the input builder, or ``_args.py``."""
    stem = BUILDER.removesuffix(".py")
    return name in (BUILDER, "_args.py") or (name.startswith(stem + "_") and name.endswith(".py"))


def _namespace_names(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    names = set()
    for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
        note = ast.unparse(a.annotation) if getattr(a, "annotation", None) is not None else ""
        if a.arg in ("args", "ns") or note.endswith("Namespace"):
            names.add(a.arg)
    return names


def namespace_access(tree: ast.AST) -> tuple[list[int], list[int]]:
    """``(read lines, write lines)`` of the Namespace in a module."""
    reads, writes = [], []

    def visit(node: ast.AST, names: frozenset[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            names = names | _namespace_names(node)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
            (writes if isinstance(node.ctx, (ast.Store, ast.Del)) else reads).append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args \
                and node.func.id in ("getattr", "hasattr", "vars", "setattr", "delattr") \
                and isinstance(node.args[0], ast.Name) and node.args[0].id in names:
            (writes if node.func.id in ("setattr", "delattr") else reads).append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, names)

    visit(tree, frozenset())
    return reads, writes


def run_lengths() -> dict[str, int]:
    """``module -> lines of its run function`` (def to last line, docstring included)."""
    out = {}
    for path in sorted(CLI.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name == "run":
                out[path.name] = node.end_lineno - node.lineno + 1
    return out


def reads_per_module() -> dict[str, tuple[list[int], list[int]]]:
    return {p.name: namespace_access(ast.parse(p.read_text())) for p in sorted(CLI.glob("*.py"))}


def test_every_run_is_at_most_40_lines():
    lengths = run_lengths()
    assert len(lengths) >= 11, lengths  # every subcommand has its run
    long = {k: v for k, v in lengths.items() if v > MAX_RUN_LINES}
    assert not long, f"run functions over {MAX_RUN_LINES} lines: {long}"


def reads_outside(access: dict[str, tuple[list[int], list[int]]]) -> dict[str, list[int]]:
    """``module -> read lines`` of the modules outside the input builder that read the Namespace."""
    return {k: r for k, (r, _) in access.items() if not exempt(k) and r}


def test_the_namespace_is_read_only_by_the_input_builder():
    outside = reads_outside(reads_per_module())
    total = sum(len(r) for r in outside.values())
    assert total <= MAX_READS_OUTSIDE, f"{total} Namespace reads outside the input builder (lines per module): " \
        f"{outside}"


def test_the_builder_is_inputs_and_its_siblings_only():
    """The exemption names the builder's modules and nothing else (so a read planted elsewhere counts)."""
    assert all(exempt(n) for n in ("inputs.py", "inputs_plan.py", "inputs_step.py", "_args.py"))
    assert not any(exempt(n) for n in ("plan.py", "search.py", "budget.py", "_fabric.py", "inputs2.py", "my_inputs.py",
                                       "my_inputs_plan.py", "inputs_plan.txt", "inputs_.pyc", "__init__.py"))
    access = reads_per_module()
    planted = dict(access, **{"plan.py": (access["plan.py"][0] + [1, 2, 3, 4], [])})
    assert sum(len(r) for r in reads_outside(planted).values()) > MAX_READS_OUTSIDE  # four reads in plan.py fail


def test_nothing_is_written_back_into_the_namespace():
    writes = {k: w for k, (_, w) in reads_per_module().items() if w}
    assert not writes, f"values written into the argparse Namespace: {writes}"


def test_the_counter_counts():
    """The counter sees each kind of read and write (so the tests above can fail)."""
    src = ("def f(args, other):\n"
           "    a = args.x + getattr(args, 'y', 0) + hasattr(args, 'z') + other.q\n"
           "    args.w = 1\n"
           "    setattr(args, 'v', 2)\n"
           "def g(n: argparse.Namespace):\n"
           "    return n.k\n")
    reads, writes = namespace_access(ast.parse(src))
    assert reads == [2, 2, 2, 6]  # args.x, getattr, hasattr, n.k; not other.q
    assert writes == [3, 4]
