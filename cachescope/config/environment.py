"""The settings tree in the environment: one rule, `CACHESCOPE_` + the field's path joined by `__`
(CACHESCOPE_API__TOKENS, CACHESCOPE_PIPELINE__CURVE__POINTS), and the flat names operators set
before the tree existed, kept as aliases (a nested name wins over its alias when both are set).

docs/settings.md's table of settings is `settings_table()` (tests/python/unit/config/test_config_tree.py keeps it
equal and prints it when it differs).
"""

from __future__ import annotations

import inspect
import json
import os
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_settings import PydanticBaseSettingsSource

PREFIX = "CACHESCOPE_"

#: flat names of before the tree → the field they set (docs/, deploy/, .env.example name some)
ALIASES: dict[str, str] = {
    **{f"CACHESCOPE_{name.upper()}": f"api.{name}" for name in (
        "store_dir", "clickhouse_url", "database", "host", "cors_origins", "whatif_max_days",
        "whatif_max_accesses", "whatif_concurrency", "whatif_max_configs", "max_body_bytes",
        "answer_cache_seconds", "series_copy_max_rows", "series_copy_check_seconds", "store_connections",
        "header_timeout_seconds", "body_timeout_seconds", "keep_alive_seconds", "max_connections",
        "max_header_bytes")},
    "CACHESCOPE_API_TOKENS": "api.tokens",
    "CACHESCOPE_API_TOKENS_FILE": "api.tokens_file",
    "CACHESCOPE_MIGRATIONS_DIR": "store.migrations_dir",
    "CACHESCOPE_FLINK_JARS": "flink.jar_dir",
}


def _is_complex(annotation: Any) -> bool:
    """Whether a field's environment value is JSON (a list, a mapping, a section)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or str(origin) == "types.UnionType":
        return any(_is_complex(a) for a in typing.get_args(annotation) if a is not type(None))
    return origin in (list, dict, tuple, set) or (isinstance(annotation, type) and issubclass(annotation, BaseModel))


def _field(root: type[BaseModel], path: str):
    model, field = root, None
    for part in path.split("."):
        field = model.model_fields[part]
        model = field.annotation
    return field


class AliasSource(PydanticBaseSettingsSource):
    """The flat names of ALIASES, as nested values of the tree."""

    def get_field_value(self, field, field_name):  # pragma: no cover - __call__ does the work
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, path in ALIASES.items():
            value = os.environ.get(name)
            if value is None:
                continue
            if _is_complex(_field(self.settings_cls, path).annotation):
                try:
                    value = json.loads(value)
                except ValueError:
                    raise ValueError(f"{name} (= {path}) must be JSON (e.g. [\"https://a.example\"])") from None
            section, _, field = path.partition(".")
            out.setdefault(section, {})[field] = value
        return out


def section_environment(section: str) -> dict[str, Any]:
    """The values the environment gives one section (nested names over aliases), unvalidated:
    what a service reads without loading the whole tree (its YAML, the pipeline's checks)."""
    from pydantic_settings import EnvSettingsSource

    from cachescope.config import CachescopeConfig

    aliased = AliasSource(CachescopeConfig)().get(section, {})
    nested = EnvSettingsSource(CachescopeConfig)().get(section, {})
    return {**aliased, **(nested if isinstance(nested, dict) else {})}


def _comments(model: type[BaseModel]) -> dict[str, str]:
    """`#: …` comments above a model's fields (its documentation where no description is given)."""
    try:
        lines = inspect.getsource(model).splitlines()
    except (OSError, TypeError):
        return {}
    out, pending = {}, []
    for line in lines:
        text = line.strip()
        if text.startswith("#:"):
            pending.append(text[2:].strip())
            continue
        name = text.split(":", 1)[0].strip()
        if pending and name.isidentifier() and name in model.model_fields:
            out[name] = " ".join(pending)
        pending = []
    return out


def _shown(value: Any) -> str:
    if value is None:
        return "(unset)"
    if value == "":
        return "(empty)"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, (list, dict)):
        return f"`{json.dumps(value, default=str)}`" if value else "(none)"
    return f"`{value}`"


def settings(root: type[BaseModel] | None = None, path: tuple[str, ...] = ()) -> list[tuple[str, Any, str]]:
    """(dotted path, default, meaning) of every leaf of the tree (sections are walked into)."""
    if root is None:
        from cachescope.config import CachescopeConfig

        root = CachescopeConfig
    notes = _comments(root)
    out = []
    for name, field in root.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and not field.is_required():
            out += settings(annotation, (*path, name))
            continue
        default = field.get_default(call_default_factory=True)
        meaning = field.description or notes.get(name, "")
        out.append((".".join((*path, name)), default, " ".join(meaning.split())))
    return out


def variable(path: str) -> str:
    return PREFIX + "__".join(path.split(".")).upper()


def settings_table() -> str:
    """docs/settings.md's table: one row per setting, its variable, default and meaning."""
    alias_of = {path: name for name, path in ALIASES.items()}
    rows = ["| variable (YAML path) | default | meaning |", "|---|---|---|"]
    for path, default, meaning in settings():
        also = f" (also `{alias_of[path]}`)" if path in alias_of else ""
        rows.append(f"| `{variable(path)}`{also} (`{path}`) | {_shown(default)} | {meaning.replace('|', '/')} |")
    return "\n".join(rows)

