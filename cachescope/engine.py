"""The compiled engine (`cachescope._simcore`, built from simcore/) and the check that it is the
one its source describes.

Parsers and the message codec have a compiled fast path proven equal to their Python reference by
tests; an engine built from older Rust would run other code than the tests proved. So, where the
checkout holds simcore/src, the engine's `SOURCE_DIGEST` (stamped by simcore/build.rs) must match
the digest of those sources: a missing or stale engine is an `EngineError` at import, one line
saying to rebuild, never a silent slow or different path. An installed wheel has no simcore/src
next to it: nothing to compare, the wheel's engine is used as built.

`CACHESCOPE_SIMCORE_SRC` names another source folder to compare with (tests use it to show a
mismatch without touching the built engine).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from cachescope.errors import UserError

SOURCE = Path(__file__).resolve().parent.parent / "simcore" / "src"
_REBUILD = "rebuild it with scripts/setup"


class EngineError(UserError):
    """The compiled engine is missing, or was built from other sources than this checkout's."""


def source_digest(src: Path) -> str:
    """MD5 over src's .rs files in sorted relative-path order, each as `path NUL content NUL`
    (what simcore/build.rs stamps into the engine)."""
    md5 = hashlib.md5(usedforsecurity=False)
    for rel in sorted(p.relative_to(src).as_posix() for p in src.rglob("*.rs")):
        md5.update(rel.encode() + b"\0")
        md5.update((src / rel).read_bytes() + b"\0")
    return md5.hexdigest()


def check(engine, src: Path | None = None) -> None:
    """Raise EngineError when `engine` was not built from `src` (default: this checkout's)."""
    if src is None:
        named = os.environ.get("CACHESCOPE_SIMCORE_SRC")
        src = Path(named) if named else SOURCE
    if not src.is_dir():
        return
    built = getattr(engine, "SOURCE_DIGEST", None)
    if built != source_digest(src):
        where = Path(getattr(engine, "__file__", "cachescope/_simcore")).name
        raise EngineError(f"the compiled engine {where} was built from other Rust sources than {src} "
                          f"(an older build): {_REBUILD}")


try:
    from cachescope import _simcore
except ImportError as exc:
    raise EngineError(f"the compiled engine cachescope._simcore cannot be loaded ({exc}): {_REBUILD}") from None
check(_simcore)

__all__ = ["EngineError", "check", "source_digest", "_simcore"]
