"""An import-linter contract type for compiled extension modules (pyproject.toml `contract_types`).

grimp builds its graph from `.py` files only, so `cachescope._simcore` (a `.so`) is not in it and
the built-in `protected` contract cannot name it. This contract reads the import statements of
every module of the root packages and allows the extension only in `allowed_importers`.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from importlinter import Contract, ContractCheck, fields, output


def _module_files(package: str):
    spec = importlib.util.find_spec(package)
    for base in (spec.submodule_search_locations or []) if spec else []:
        for path in sorted(Path(base).rglob("*.py")):
            rel = path.relative_to(Path(base).parent).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path, path.name == "__init__.py"


def imported_modules(module: str, path: Path, is_package: bool):
    """(line, module) of every import in a file, `from a import b` giving both a and a.b."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[:len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


class ExtensionImportersContract(Contract):
    """Only `allowed_importers` import `extension` (a compiled module grimp cannot see)."""

    type_name = "extension_importers"

    extension = fields.StringField()
    allowed_importers = fields.ListField(subfield=fields.StringField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        allowed = set(self.allowed_importers)  # type: ignore[arg-type]
        bad = []
        for package in self.session_options["root_packages"]:
            for module, path, is_package in _module_files(package):
                if module in allowed:
                    continue
                for line, name in imported_modules(module, path, is_package):
                    if name == self.extension or name.startswith(f"{self.extension}."):
                        bad.append(f"{module} (l.{line}) imports {name}")
        return ContractCheck(kept=not bad, metadata={"bad": bad})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["bad"]:
            output.print_error(line, bold=False)
            output.new_line()
        output.print(f"Import what you need from {' or '.join(self.allowed_importers)} instead.")  # type: ignore[arg-type]
