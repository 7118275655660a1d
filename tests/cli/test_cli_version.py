"""``commcost --version`` (the dispatcher, ``cli/__init__.py``) prints the package version and exits 0."""

from __future__ import annotations

from conftest import run_commcost


def test_version_flag():
    # was "unknown subcommand '--version'" with exit 2
    import commcost

    r = run_commcost("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"commcost {commcost.__version__}"
