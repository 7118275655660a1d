"""The ``commcost`` command line: a thin layer of subcommands over the public API.

Each subcommand lives in its own module exposing ``HELP``, ``EXAMPLES`` (the command lines
its ``--help`` ends with), ``add_arguments(parser)`` and ``run(args) -> int``, and is listed once in :data:`SUBCOMMANDS`. Modules here
import only the standard library at import time; heavy imports happen in ``run``.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from commcost.cli._args import Parser, fail
from commcost.errors import InputError

__all__ = ["main", "budget_main", "SUBCOMMANDS"]

SUBCOMMANDS: dict[str, str] = {
    "budget": "commcost.cli.budget",
    "collective": "commcost.cli.collective",
    "presets": "commcost.cli.presets",
    "scaling": "commcost.cli.scaling",
    "timeline": "commcost.cli.timeline",
    "measure": "commcost.cli.measure",
    "fit": "commcost.cli.fit",
    "validate": "commcost.cli.validate",
    "plan": "commcost.cli.plan",
    "trace": "commcost.cli.trace",
    "search": "commcost.cli.search",
}
"""Subcommand name -> module implementing it."""


def _dispatch(module_name: str, prog: str, argv: Sequence[str]) -> int:
    module = importlib.import_module(module_name)
    examples = getattr(module, "EXAMPLES", ())
    epilog = "examples:\n" + "\n".join(f"  {prog} {e}".rstrip() for e in examples) if examples else None
    parser = Parser(prog=prog, description=module.HELP, epilog=epilog)
    module.add_arguments(parser)
    args = parser.parse_args(list(argv))
    try:
        return module.run(args)
    except BrokenPipeError:
        # the reader (head, less) went away: not an error of ours
        sys.stdout = open(os.devnull, "w")
        return 0
    except InputError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "))


def main(argv: Sequence[str] | None = None) -> int:
    """``commcost SUBCOMMAND ...``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        lines = ["usage: commcost SUBCOMMAND [options]   (commcost SUBCOMMAND --help for its flags)", ""]
        for name, module_name in SUBCOMMANDS.items():
            lines.append(f"  {name:<12} {importlib.import_module(module_name).HELP}")
        print("\n".join(lines), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "--version":
        from commcost import __version__

        print(f"commcost {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        fail(f"unknown subcommand {name!r} (valid: {', '.join(SUBCOMMANDS)})")
    return _dispatch(SUBCOMMANDS[name], f"commcost {name}", rest)


def budget_main(argv: Sequence[str] | None = None, prog: str = "python tools/collective_cost.py") -> int:
    """The drill's ``tools/collective_cost.py``: the budget subcommand without its name."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return _dispatch(SUBCOMMANDS["budget"], prog, argv)
