"""XrdPfc's own files for the `xcache` model: its parameters as sites write them, the real cache's
configuration file (`pfc.*` lines) and what it holds now (`xrdpfc_print -j` output, a warm start).

The model and its parameters are specified in simcore/src/policy/xcache.rs.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Callable, Mapping

from cachescope.errors import UserError
from cachescope.units import SizeError, parse_size

#: the model's parameters and how each is written: `level` a fraction of the size (≤ 1) or a size
#: (`300MB`), `size` bytes or a size, `seconds` seconds or a duration (`60s`, `5m`, `2h`, `7d`),
#: `count` a whole number, `rate` bytes per second or a link rate (`100Mbit/s`, `12.5MB/s`), `version`
#: an XRootD version (`6.2.1`, `v5.5.3`: the engine takes major + minor / 100)
XCACHE_PARAMS: dict[str, str] = {
    "block_size": "size",
    "low_watermark": "level",
    "high_watermark": "level",
    "files_baseline": "level",
    "files_nominal": "level",
    "files_max": "level",
    "baseline_used": "size",
    "purge_interval": "seconds",
    "purge_cold_age": "seconds",
    "purge_cold_period": "count",
    "prefetch": "count0",
    "origin_rate": "rate",
    "xrootd_version": "version",
}

_BITS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:bit/s|bps)\s*$", re.I)
_VERSION = re.compile(r"^\s*v?(\d+)(?:\.(\d+))?(?:\.\d+)*(?:[-+].*)?\s*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)?\s*$", re.I)
_SECONDS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}


class XrdPfcError(UserError, ValueError):
    """A value, file or line XrdPfc's files cannot be read from: the message names it."""


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _seconds(text: object) -> float | None:
    n = _number(text)
    if n is not None:
        return n
    m = _DURATION.match(str(text))
    return float(m.group(1)) * _SECONDS[(m.group(2) or "s").lower()] if m else None


def xrootd_version(text: object) -> float:
    """An XRootD version as the xcache model takes it: `6.2.1`, `v5.5.3`, `5.7` → major + minor /
    100 (6.02, 5.05, 5.07). XrdPfcError for anything else."""
    m = _VERSION.match(str(text)) if not isinstance(text, bool) else None
    if m is None or not 4 <= int(m.group(1)) < 100 or int(m.group(2) or 0) >= 100:
        raise XrdPfcError(f"parameter xrootd_version={text!r} must be an XRootD version like 6.2.1 or 5.5.3")
    return int(m.group(1)) + int(m.group(2) or 0) / 100


def param_value(name: str, value: object) -> float:
    """One `--param`/configuration value as the engine takes it (a number); for xcache's
    parameters also sizes, durations and versions. XrdPfcError names the parameter."""
    kind = XCACHE_PARAMS.get(name)
    if kind == "version":
        return xrootd_version(value)
    n = _number(value)
    if kind in (None, "count", "count0"):
        low = 1 if kind == "count" else 0
        if n is None or (kind and (n < low or n != int(n))):
            what = f"a whole number ≥ {low}" if kind else "a number"
            raise XrdPfcError(f"parameter {name}={value!r} must be {what}")
        return n
    if kind == "rate":
        # a link's rate as sites quote it (bits per second, decimal) or bytes per second
        m = _BITS.match(str(value))
        if m:
            return float(m.group(1)) * 10 ** (3 * " kmgt".index((m.group(2) or " ").lower())) / 8
        text = str(value).strip()
        if n is None and text.lower().endswith("/s"):
            text = text[:-2]
        try:
            rate = n if n is not None else float(parse_size(text))
        except SizeError:
            rate = -1.0
        if rate < 0:
            raise XrdPfcError(f"parameter {name}={value!r} must be bytes per second or a rate like 100Mbit/s, 12.5MB/s")
        return rate
    if kind == "seconds":
        s = _seconds(value)
        if s is None or s < 0:
            raise XrdPfcError(f"parameter {name}={value!r} must be seconds or a duration like 60s, 5m, 2h, 7d")
        return s
    if n is not None:
        if n < 0:
            raise XrdPfcError(f"parameter {name}={value!r} must not be negative")
        return n
    try:
        return float(parse_size(str(value)))
    except SizeError:
        hint = "a fraction of the size (≤ 1) or a size like 300MB, 1.5GiB" if kind == "level" else "a size like 1MiB"
        raise XrdPfcError(f"parameter {name}={value!r} must be {hint}") from None


def params_for(policy: str, raw: Mapping[str, object]) -> dict[str, float]:
    """A policy's parameters as numbers: sizes and durations for xcache's, plain numbers for the
    others (the engine refuses names a policy does not have)."""
    if policy == "xcache":
        return {k: param_value(k, v) for k, v in raw.items()}
    out = {}
    for k, v in raw.items():
        n = _number(v)
        if n is None:
            raise XrdPfcError(f"parameter {k}={v!r} of policy {policy} must be a number")
        out[k] = n
    return out


# --------------------------------------------------------------------------------------------
# The cache's configuration file

#: directives that do not change which blocks are cached or purged (ignored)
_NO_EFFECT = {"ram", "trace", "writequeue", "spaces", "cschk", "flush", "acchistorysize", "user",
              "osslib", "decisionlib", "allow_xrdpfc_command", "hdfsmode", "dirstats", "purgelib", "checksum",
              "onlyifcached", "httpcc", "writethrough"}
_XRD_SIZE = re.compile(r"^(\d+)([kKmMgGtT])?$")
_VAR = re.compile(r"\$(?:\{(\w+)\}|\((\w+)\)|(\w+))")


def _xrd_size(word: str, line: int, path: str) -> int:
    """A size as XRootD's a2sz reads it: bytes, or k/m/g/t (binary)."""
    m = _XRD_SIZE.match(word)
    if not m:
        raise XrdPfcError(f"{path}:{line}: {word!r} is not a size like 1048576, 512k, 1m, 2g")
    return int(m.group(1)) * 1024 ** " kmgt".index((m.group(2) or " ").lower())


def _level(word: str, line: int, path: str, what: str) -> float:
    """A `pfc.diskusage` value as XrdPfc reads it: a size when it ends in a letter, else a
    fraction of the filesystem (a plain number above 1 is refused, as XrdPfc does)."""
    if word[-1:].isalpha():
        return float(_xrd_size(word, line, path))
    try:
        v = float(word)
    except ValueError:
        raise XrdPfcError(f"{path}:{line}: pfc.diskusage {what} {word!r} is not a fraction or a size like 150m") from None
    if not 0 <= v <= 1:
        raise XrdPfcError(f"{path}:{line}: pfc.diskusage {what} {word!r}: a plain number is a fraction of the "
                          "filesystem (0 to 1); write a size with its unit (e.g. 150m)")
    return v


def _xrd_seconds(word: str, line: int, path: str, what: str) -> float:
    s = _seconds(word) if word else None
    if s is None:
        raise XrdPfcError(f"{path}:{line}: {what} {word!r} is not a time like 300, 60s, 5m, 2h, 1d")
    return s


def _lines(path: str, text: str):
    """(line number, words) of an XRootD configuration file: `#` comments, `\\` continuations,
    `set`/`setenv` variables substituted (`$v`, `${v}`, `$(v)`), `if exec …`/`if named …`/
    `else`/`fi` evaluated for an xrootd server named `instance`."""
    raw = text.splitlines()
    joined: list[tuple[int, str]] = []
    buf, start = "", 0
    for i, line in enumerate(raw, 1):
        if not buf:
            start = i
        line = re.sub(r"(^|\s)#.*$", "", line).rstrip()
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        joined.append((start, buf + line))
        buf = ""
    if buf:
        joined.append((start, buf))
    return joined


def read_config(path: str | Path, instance: str = "anon") -> dict[str, float]:
    """The `xcache` parameters a real cache's configuration file sets (`pfc.blocksize`,
    `pfc.diskusage low high [files baseline nominal max] [purgeinterval t] [purgecoldfiles age
    period]`, `pfc.prefetch`, XrdPfc's default 10 when absent; `xrootd_version` 6 when its
    `ofs.osslib`/`pss.cachelib` name a `-6.so` plugin); directives without effect on what
    is cached (`pfc.ram`, `pfc.trace`, …) and other components' lines are ignored. XrdPfcError
    names the file and line of anything else."""
    p = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise XrdPfcError(f"{p}: cannot read the XRootD configuration ({e.strerror or e})") from None
    variables: dict[str, str] = {}
    # stack of (this branch taken, some branch of this if taken)
    conds: list[tuple[bool, bool]] = []
    out: dict[str, float] = {}
    for n, line in _lines(p, text):
        words = line.split()
        if not words:
            continue
        head = words[0]
        active = all(c[0] for c in conds)
        if head == "if":
            taken = _condition(words[1:], instance, n, p) if active else False
            conds.append((taken, taken))
            continue
        if head in ("else", "fi"):
            if not conds:
                raise XrdPfcError(f"{p}:{n}: {head} without if")
            if head == "fi":
                conds.pop()
            else:
                _, done = conds.pop()
                if len(words) > 1 and words[1] == "if":
                    taken = not done and all(c[0] for c in conds) and _condition(words[2:], instance, n, p)
                    conds.append((taken, done or taken))
                else:
                    conds.append((not done, True))
            continue
        if not active:
            continue
        if head in ("set", "setenv"):
            rest = line.split(None, 1)[1] if len(words) > 1 else ""
            name, _, value = rest.partition("=")
            if not name.strip() or not _:
                raise XrdPfcError(f"{p}:{n}: {head} must look like `{head} name = value`")
            variables[name.strip()] = _substitute(value.strip(), variables, n, p, strict=False)
            continue
        if head in ("ofs.osslib", "pss.cachelib"):
            _plugin_version(words[1:], out)
            continue
        if not head.startswith("pfc."):
            continue  # other components' directives
        words = _substitute(line, variables, n, p, strict=True).split()
        _directive(words, out, n, p)
    if conds:
        raise XrdPfcError(f"{p}: an if has no fi")
    out.setdefault("prefetch", 10.0)  # XrdPfc prefetches 10 blocks per file unless told otherwise
    return out


#: a plugin named with its major version (`libXrdPfc-6.so`): XRootD loads that one
_PLUGIN_MAJOR = re.compile(r"libXrd(?:Pss|Pfc|FileCache)-(\d+)\.so")


def _plugin_version(args: list[str], out: dict[str, float]) -> None:
    """`libXrdPss-6.so`/`libXrdPfc-6.so` say the cache runs XRootD 6 (its purge timing: the
    model's `xrootd_version`); a `-5` name says nothing (5.5 and 5.7 time purges differently),
    nor does the plain name sites usually write (`--param xrootd_version=` says it then)."""
    for word in args:
        m = _PLUGIN_MAJOR.search(word)
        if m and int(m.group(1)) >= 6:
            out["xrootd_version"] = float(int(m.group(1)))


def _substitute(text: str, variables: Mapping[str, str], n: int, p: str, strict: bool) -> str:
    def value(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        if name in variables:
            return variables[name]
        if strict:
            raise XrdPfcError(f"{p}:{n}: ${name} is not set in this file (only `set` variables are known)")
        return m.group(0)

    return _VAR.sub(value, text)


def _condition(words: list[str], instance: str, n: int, p: str) -> bool:
    if words and words[0] == "exec":
        return "xrootd" in words[1:]
    if words and words[0] == "named":
        return instance in words[1:]
    raise XrdPfcError(f"{p}:{n}: `if {' '.join(words)}` is not supported here (only `if exec …` and "
                      "`if named …`); remove the condition around the pfc lines that apply to this cache")


def _directive(words: list[str], out: dict[str, float], n: int, p: str) -> None:
    name, args = words[0][4:], words[1:]
    if name == "blocksize":
        if len(args) != 1:
            raise XrdPfcError(f"{p}:{n}: pfc.blocksize takes one size")
        out["block_size"] = float(_xrd_size(args[0], n, p))
    elif name == "diskusage":
        if len(args) < 2:
            raise XrdPfcError(f"{p}:{n}: pfc.diskusage needs at least a low and a high watermark")
        out["low_watermark"] = _level(args[0], n, p, "low watermark")
        out["high_watermark"] = _level(args[1], n, p, "high watermark")
        i = 2
        while i < len(args):
            key = args[i]
            if key == "files" and len(args) >= i + 4:
                for k, w in zip(("files_baseline", "files_nominal", "files_max"), args[i + 1:i + 4]):
                    out[k] = _level(w, n, p, k.replace("_", " "))
                i += 4
            elif key in ("purgeinterval", "sleep") and i + 1 < len(args):
                t = _xrd_seconds(args[i + 1], n, p, "purgeinterval")
                if not 60 <= t <= 3600:
                    raise XrdPfcError(f"{p}:{n}: purgeinterval {args[i + 1]!r} must be 60 s to 1 h (XrdPfc's range)")
                out["purge_interval"] = t
                i += 2
            elif key == "purgecoldfiles" and i + 2 < len(args):
                _cold(args[i + 1], args[i + 2], out, n, p)
                i += 3
            else:
                raise XrdPfcError(f"{p}:{n}: pfc.diskusage: {key!r} is not files B N M, purgeinterval T or "
                                  "purgecoldfiles AGE PERIOD (or lacks its values)")
    elif name == "prefetch":
        if len(args) != 1 or not args[0].isdigit():
            raise XrdPfcError(f"{p}:{n}: pfc.prefetch takes a number of blocks")
        out["prefetch"] = float(args[0])
    elif name == "purgecoldfiles":
        if len(args) != 2:
            raise XrdPfcError(f"{p}:{n}: pfc.purgecoldfiles takes an age and a period")
        _cold(args[0], args[1], out, n, p)
    elif name in _NO_EFFECT:
        pass
    else:
        raise XrdPfcError(f"{p}:{n}: pfc.{name} is not a directive this reader knows; remove it from the copy "
                          "given to cachescope if it does not change what is cached")


def _cold(age: str, period: str, out: dict[str, float], n: int, p: str) -> None:
    a = _xrd_seconds(age, n, p, "purgecoldfiles age")
    if not period.isdigit() or not 1 <= int(period) <= 1000:
        raise XrdPfcError(f"{p}:{n}: purgecoldfiles period {period!r} must be 1 to 1000 purges")
    out["purge_cold_age"] = a
    out["purge_cold_period"] = float(period)


# --------------------------------------------------------------------------------------------
# What the real cache holds: `xrdpfc_print -j` output


def cinfo_lfn(cinfo_path: str, root: str = "") -> str:
    """The file a `.cinfo` describes, as clients name it: `./store/x.root.cinfo` (a path under
    the cache's `oss.localroot`, given without it or with `root` stripped) → `/store/x.root`."""
    path = cinfo_path
    if root and path.startswith(root):
        path = path[len(root):]
    if path.endswith(".cinfo"):
        path = path[: -len(".cinfo")]
    if path.startswith("./"):
        path = path[1:]
    return path if path.startswith("/") else "/" + path


def _cinfo_time(text: str, tz: dt.tzinfo) -> int | None:
    """`YYMMDD:HHMMSS` (the cache host's local time) as epoch seconds; None for `------:------`."""
    try:
        return int(dt.datetime.strptime(text, "%y%m%d:%H%M%S").replace(tzinfo=tz).timestamp())
    except (TypeError, ValueError):
        return None


def read_seed(path: str | Path, normalise: Callable[[str], str] = lambda p: p, root: str = "",
              tz: dt.tzinfo = dt.timezone.utc) -> list[tuple[int, int, int]]:
    """The files a real cache holds, from `xrdpfc_print -j` over its `.cinfo` files (one JSON
    object per line, or one JSON array): (file_id, cached bytes, last access in epoch seconds) per
    file. `file_id` is that of the normalised path, as the parsers give it (`normalise`: the tier
    classifier's path normalisation). Cached bytes are the downloaded blocks (the block map when
    printed, else `state_percentage` of the blocks), the last block being the file's remainder;
    the last access is the latest access record's detach time (its attach time while open), in
    `tz`, the cache host's time zone."""
    from cachescope.events import file_id_of

    p = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise XrdPfcError(f"{p}: cannot read the xrdpfc_print output ({e.strerror or e})") from None
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            records = list(enumerate(json.loads(stripped), 1))
        else:
            records = [(i, json.loads(line)) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    except json.JSONDecodeError as e:
        raise XrdPfcError(f"{p}: not xrdpfc_print -j output ({e.msg} at line {e.lineno})") from None
    files = []
    for i, r in records:
        try:
            size, block, n_blocks = int(r["file_size"]), int(r["buffer_size"]), int(r["n_blocks"])
            blocks = r.get("block_array")
            if isinstance(blocks, str):
                done = sum(1 for c in blocks if c in "x1")
                last_done = blocks[-1:] in ("x", "1")
            elif isinstance(blocks, list):
                done, last_done = sum(1 for b in blocks if b), bool(blocks and blocks[-1])
            else:
                done = round(float(r["state_percentage"]) * n_blocks / 100)
                last_done = done == n_blocks
            lfn = cinfo_lfn(str(r["file"]), root)
            accesses = r.get("accesses") or []
        except (KeyError, TypeError, ValueError) as e:
            raise XrdPfcError(f"{p}:{i}: not an xrdpfc_print -j record ({type(e).__name__}: {e})") from None
        cached = min(done * block, size) if not last_done else max(0, size - (n_blocks - done) * block)
        last = 0
        for a in accesses:
            t = _cinfo_time(a.get("detach"), tz) or _cinfo_time(a.get("attach"), tz)
            last = max(last, t or 0)
        if cached > 0:
            files.append((file_id_of(normalise(lfn)), cached, min(last, 2**32 - 1)))
    return files
