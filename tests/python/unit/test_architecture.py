"""The package graph stays acyclic and layered (pyproject.toml [tool.importlinter])."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_import_layers_hold():
    lint = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run([str(lint), "--config", str(REPO / "pyproject.toml")], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 3 kept, 0 broken" in out.stdout


def test_the_engine_contract_sees_a_direct_import(tmp_path):
    """The `_simcore` contract reads imports itself (grimp cannot see a .so): it must catch both forms."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_contracts", REPO / "scripts" / "lib" / "import_contracts.py")
    contracts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(contracts)
    imported_modules = contracts.imported_modules

    for text in ("from cachescope import _simcore", "from cachescope._simcore import Bank", "import cachescope._simcore"):
        path = tmp_path / "m.py"
        path.write_text(text + "\n")
        assert "cachescope._simcore" in {m for _, m in imported_modules("cachescope.core.m", path, False)}, text
    path.write_text("from .. import _simcore\n")
    assert "cachescope._simcore" in {m for _, m in imported_modules("cachescope.core.m", path, False)}


def test_the_engine_stub_names_what_the_extension_exports():
    """cachescope/_simcore.pyi declares every public name of the compiled module, and nothing more,
    and each class's public methods and properties."""
    from cachescope import _simcore

    tree = ast.parse((REPO / "cachescope" / "_simcore.pyi").read_text())
    declared: dict[str, set[str] | None] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            declared[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)
                                   and not n.name.startswith("_")}
        elif isinstance(node, ast.FunctionDef):
            declared[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            declared[node.target.id] = None
    declared = {k: v for k, v in declared.items() if not k.startswith("_")}
    public = {n for n in dir(_simcore) if not n.startswith("_")}
    assert set(declared) == public
    for name, methods in declared.items():
        if methods is not None:
            cls = getattr(_simcore, name)
            assert methods == {m for m in dir(cls) if not m.startswith("_")}, name
