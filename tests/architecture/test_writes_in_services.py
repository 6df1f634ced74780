"""Every write goes through `incidents/services/` (and the SQL it uses, `incidents/sql.py`): no
other module of the app calls the ORM's writing methods. Read from the source with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRITES = {
    "create",
    "bulk_create",
    "bulk_update",
    "update_or_create",
    "get_or_create",
    "update",
    "delete",
    "save",
    "create_user",
    "create_superuser",
    "set_password",
    "add",
}
ALLOWED = ("incidents/services/", "incidents/sql.py", "incidents/migrations/")


def writes_in(path: Path) -> list[str]:
    """`<...>.objects...<write>(...)` calls, and `.save(` / `.groups.add(` on anything."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES
        ):
            continue
        receiver = ast.unparse(node.func.value)
        if (
            ".objects" in receiver
            or receiver.endswith("objects")
            or node.func.attr == "save"
            or receiver.endswith(".groups")
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {receiver}.{node.func.attr}(...)")
    return found


def test_no_module_outside_the_services_writes_through_the_orm():
    modules = [
        path
        for path in (ROOT / "incidents").rglob("*.py")
        if not str(path.relative_to(ROOT)).startswith(ALLOWED)
    ]
    assert [line for path in modules for line in writes_in(path)] == []


def test_the_finder_sees_a_write():
    sample = ROOT / "incidents" / "services" / "pending_actions.py"
    assert any("update_or_create" in line for line in writes_in(sample))
