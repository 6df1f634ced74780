"""No module of the project over 600 lines (migrations and tests aside): past that a module does
more than one job, and the next engineer cannot find their way in it. `corpus/` is test data: its
generator is kept as the session that wrote it independently left it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 600
OUTSIDE = ("tests", "corpus", ".venv", "var", "node_modules")


def project_modules() -> list[Path]:
    return [
        path
        for path in ROOT.rglob("*.py")
        if not set(path.relative_to(ROOT).parts) & {*OUTSIDE, "migrations"}
    ]


def test_no_module_is_over_600_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in project_modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
    }
    assert long == {}
