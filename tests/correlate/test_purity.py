import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("django", "celery", "rest_framework", "incidents", "rootline")
ENGINE_MODULES = [
    "correlate",
    "correlate.engine",
    "correlate.catalog",
    "correlate.classify",
    "correlate.topology",
    "correlate.timing",
    "correlate.ranking",
    "correlate.results",
    "correlate.io",
    "correlate.scoring",
    "correlate.cli",
    "correlate.score",
    "correlate.testing",
    "correlate.events",
    "correlate.batch",
    "correlate.partition",
    "correlate.rewind",
    "correlate.linking",
    "correlate.assembly",
    "correlate.entries",
    "correlate.pagerduty",
    "correlate.ingest",
]


def test_importing_the_engine_loads_no_django_celery_or_app_module():
    code = (
        "import importlib, json, sys\n"
        f"for m in {ENGINE_MODULES!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    offenders = [m for m in loaded if m.split(".")[0] in FORBIDDEN]
    assert offenders == []


def test_no_engine_source_file_imports_django_celery_or_the_app():
    offenders = []
    for path in (ROOT / "correlate").rglob("*.py"):
        if "simulator" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []
