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
``cli/inputs_<concern>.py``, directly in ``cli/`` (``_parser.py`` defines the parser and ``_args.py`` the flag types:
they read none)."""


def exempt(name: str) -> bool:
    """Whether the module ``cli/<name>`` may read the Namespace: the input builder, ``_args.py`` or ``_parser.py``."""
    stem = BUILDER.removesuffix(".py")
    return name in (BUILDER, "_args.py", "_parser.py") or (name.startswith(stem + "_") and name.endswith(".py"))


def resolver(name: str) -> bool:
    """Whether ``cli/<name>`` belongs to the parse and resolve layer (flag types and bounds, SI conversion,
    the fabric resolver, the dispatcher): converting units there is its job. Every other module of
    ``cli/`` is a subcommand whose functions only call and render: no arithmetic (:func:`arithmetic`)."""
    return exempt(name) or name in ("_fabric.py", "__init__.py")


_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


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


def _constant(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand)
    if isinstance(node, ast.BinOp):
        return _constant(node.left) and _constant(node.right)
    return isinstance(node, ast.Constant)


def _text_or_list(node: ast.AST) -> bool:
    """A string, f-string or list/tuple display: ``+`` on it joins, it does not compute."""
    return isinstance(node, (ast.JoinedStr, ast.List, ast.Tuple, ast.ListComp)) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str))


def arithmetic(tree: ast.AST) -> list[str]:
    """``function:line: expression`` for each sum, difference, product, quotient, power or remainder
    inside a function, each augmented assignment, and each ``math.*`` call; a constant expression
    (``25 * 2.0**20`` as a flag's default) and ``+`` joining text or lists are not arithmetic."""
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC) and not _constant(node):
                if isinstance(node.op, ast.Add) and (_text_or_list(node.left) or _text_or_list(node.right)):
                    continue
                if isinstance(node.op, ast.Mod) and _text_or_list(node.left):  # "%s" % x
                    continue
            elif not (isinstance(node, ast.AugAssign) and isinstance(node.op, _ARITHMETIC)) and not (
                    isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "math"):
                continue
            found.append(f"{fn.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_subcommands_do_no_arithmetic():
    """Nodes from GPUs, a bar's fraction, an exit status: each is a library (or ``_args``) function the
    subcommand calls (``fit --tiers`` -> :func:`commcost.calibrate.tiers.log_tier_samples`, the bars ->
    :mod:`commcost.report.progress`)."""
    found = {p.name: a for p in sorted(CLI.glob("*.py")) if not resolver(p.name)
             and (a := arithmetic(ast.parse(p.read_text())))}
    assert not found, f"arithmetic in cli/ subcommands (move it into the library): {found}"


def test_the_arithmetic_finder_finds():
    """A planted case of each kind is found, and the allowed forms are not (so the test above can fail)."""
    src = ("import math\n"
           "def run(args):\n"
           "    nodes = math.ceil(series.gpus / G)\n"        # line 3: the call and the quotient
           "    filled = int(30 * done / max(total, 1))\n"  # line 4: the product and the quotient
           "    n += 1\n"                                    # line 5
           "    code = 128 + signum\n"                       # line 6
           "    default = 25 * 2.0**20\n"                    # constant: allowed
           "    text = 'a' + b\n"                            # joins text: allowed
           "    rows = [x] + more\n"                         # joins lists: allowed
           "    return f'{a}{b}'\n")
    found = arithmetic(ast.parse(src))
    assert sorted(int(f.split(":")[1]) for f in found) == [3, 3, 4, 4, 5, 6], found
    assert any("math.ceil" in f for f in found) and any("128 + signum" in f for f in found)


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
