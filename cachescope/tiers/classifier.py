"""Data-tier classifier: the engine behind the YAML rules in rules.yaml (read that file's header)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, NamedTuple

import yaml

from cachescope.errors import UsageError

UNKNOWN = "UNKNOWN"

_LIST_KEYS = ("detect", "normalise", "rules", "base_tier", "is_mc_when", "pileup_when")
_SCALAR_KEYS = ("detect_by_rules", "rucio", "tier_like", "default", "replace")
_RULE_KEYS = {"name", "match", "regex", "tier", "scan_tokens", "default", "detects"}
_ON = ("path", "name", "scope")


class TierInfo(NamedTuple):
    tier: str
    vo: str  # "" when no VO's rules recognise the path
    path: str  # normalised path
    base_tier: str
    is_mc: bool
    pileup: bool
    rule: str  # name of the rule that decided ("" for the default)
    scope: str | None = None  # rucio scope, when the path or DID names one
    rucio_hash_ok: bool | None = None  # md5 hash directories verified (None: not a rucio path)


class RulesError(UsageError, ValueError):
    """Data-tier rules that cannot be used (exit 2)."""


# ---------------------------------------------------------------------------------------------
# generic clean-up, before any VO rule

_URL_PREFIX = re.compile(r"^(?:/*[A-Za-z][A-Za-z0-9+.\-]*://[^/]*)+")
_SFN = re.compile(r"[?&]SFN=")
_SLASHES = re.compile(r"//+")


def clean_path(raw: str) -> str:
    """Strip URL schemes/hosts (also nested), unwrap SRM ?SFN=, drop the query, collapse '//'."""
    p = raw.strip()
    if "SFN=" in p:
        m = _SFN.search(p)
        if m:
            p = p[m.end() :]
            amp = p.find("&")
            if amp >= 0:
                p = p[:amp]
    if "://" in p:
        p = _URL_PREFIX.sub("", p)
    q = p.find("?")
    if q >= 0:
        p = p[:q]
    if "//" in p:
        p = _SLASHES.sub("/", p)
    if p and p[0] != "/" and "/" in p:
        p = "/" + p
    return p


def _name_of(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    if ":" in name and "/" not in path:  # a DID scope:name
        name = name.split(":", 1)[1]
    return name


def rucio_hash(scope: str, name: str) -> str:
    """The two hash directories of rucio's deterministic path: md5("scope:name")[0:4]."""
    return hashlib.md5(f"{scope}:{name}".encode("utf-8", "surrogatepass")).hexdigest()[:4]


def rucio_path(scope: str, name: str) -> str:
    """Canonical ATLAS path of a DID (user/group scopes written with '/')."""
    h = rucio_hash(scope, name)
    scope_path = scope.replace(".", "/") if scope.startswith(("user.", "group.")) else scope
    return f"/atlas/rucio/{scope_path}/{h[:2]}/{h[2:]}/{name}"


# ---------------------------------------------------------------------------------------------
# compiled rules


_GROUP_REF = re.compile(r"\\(\d+)|\\g<(\w+)>")


def _pieces(rx: re.Pattern[str], repl: str) -> list[str | int]:
    """A `re.sub` template as literal texts and group numbers (named groups resolved)."""
    pieces: list[str | int] = []
    pos = 0
    for m in _GROUP_REF.finditer(repl):
        pieces.append(repl[pos : m.start()].replace("\\\\", "\\"))
        ref = m.group(1) or m.group(2)
        pieces.append(int(ref) if ref.isdigit() else rx.groupindex[ref])
        pos = m.end()
    pieces.append(repl[pos:].replace("\\\\", "\\"))
    return pieces


def _substitution(rx: re.Pattern[str], pieces: list[str | int]) -> Callable[[str], str]:
    """`rx.sub(repl, text, count=1)` with the template parsed once (re.sub re-expands per call)."""
    literal = [p for p in pieces if isinstance(p, str)]
    if len(literal) == len(pieces):
        text = "".join(literal)

        def sub_literal(s: str) -> str:
            m = rx.search(s)
            return s if m is None else s[: m.start()] + text + s[m.end() :]

        return sub_literal

    def sub(s: str) -> str:
        m = rx.search(s)
        if m is None:
            return s
        g = m.group
        return s[: m.start()] + "".join(p if isinstance(p, str) else (g(p) or "") for p in pieces) + s[m.end() :]

    return sub


def _compile(regex: Any, where: str) -> re.Pattern[str]:
    if not isinstance(regex, str):
        raise RulesError(f"{where}: regex must be a string, got {regex!r}")
    try:
        return re.compile(regex)
    except re.error as exc:
        raise RulesError(f"{where}: bad regex {regex!r}: {exc}") from exc


@dataclass(slots=True)
class _Rule:
    name: str
    on: str
    regex: re.Pattern[str]
    tier: str
    templated: bool
    single_group: str | None  # tier is exactly "{group}"
    scan_tokens: bool
    default: str
    detects: bool


@dataclass(slots=True)
class _VO:
    name: str
    detect: list[re.Pattern[str]]
    detect_by_rules: bool
    normalise: list[tuple[re.Pattern[str], Callable[[str], str]]]
    normalise_pieces: list[list[str | int]]  # the templates of `normalise`, for the compiled form
    rules: list[_Rule]
    default: str
    base_tier: list[tuple[re.Pattern[str], Callable[[str], str]]]
    is_mc_when: list[tuple[str, re.Pattern[str]]]
    pileup_when: list[tuple[str, re.Pattern[str]]]
    rucio: tuple[re.Pattern[str], str] | None
    tier_like: re.Pattern[str] | None


def _refs(repl: str) -> list[int | str]:
    return [int(m.group(1)) if m.group(1) else m.group(2) for m in _GROUP_REF.finditer(repl)]


def _build_vo(name: str, block: Mapping[str, Any]) -> _VO:
    where = f"vos.{name}"
    unknown = set(block) - set(_LIST_KEYS) - set(_SCALAR_KEYS)
    if unknown:
        raise RulesError(f"{where}: unknown keys {sorted(unknown)}")

    def subs(key: str) -> list[tuple[re.Pattern[str], Callable[[str], str], list[str | int]]]:
        out = []
        for i, item in enumerate(block.get(key) or []):
            if not isinstance(item, Mapping) or "regex" not in item or "replace" not in item:
                raise RulesError(f"{where}.{key}[{i}]: needs regex and replace")
            rx = _compile(item["regex"], f"{where}.{key}[{i}]")
            try:
                pieces = _pieces(rx, str(item["replace"]))
                out.append((rx, _substitution(rx, pieces), pieces))
            except (KeyError, IndexError) as exc:
                raise RulesError(f"{where}.{key}[{i}]: replace names a group the regex lacks: {exc}") from None
            if any(isinstance(n, int) and n > rx.groups for n in _refs(str(item["replace"]))):
                raise RulesError(f"{where}.{key}[{i}]: replace names a group the regex lacks")
        return out

    def conditions(key: str) -> list[tuple[str, re.Pattern[str]]]:
        out = []
        for i, item in enumerate(block.get(key) or []):
            if not isinstance(item, Mapping) or "field" not in item or "regex" not in item:
                raise RulesError(f"{where}.{key}[{i}]: needs field and regex")
            out.append((str(item["field"]), _compile(item["regex"], f"{where}.{key}[{i}]")))
        return out

    rules = []
    for i, item in enumerate(block.get("rules") or []):
        rw = f"{where}.rules[{i}]"
        if not isinstance(item, Mapping):
            raise RulesError(f"{rw}: must be a mapping")
        extra = set(item) - _RULE_KEYS
        if extra:
            raise RulesError(f"{rw}: unknown keys {sorted(extra)}")
        on = item.get("match", "path")
        if on not in _ON:
            raise RulesError(f"{rw}: match must be one of {_ON}, got {on!r}")
        scan = bool(item.get("scan_tokens", False))
        if "tier" not in item and not scan:
            raise RulesError(f"{rw}: needs tier (or scan_tokens)")
        if scan and "default" not in item:
            raise RulesError(f"{rw}: scan_tokens needs a default tier")
        regex = _compile(item.get("regex"), rw)
        tier = str(item.get("tier", ""))
        templated = "{" in tier
        if templated:
            missing = set(re.findall(r"\{(\w+)\}", tier)) - set(regex.groupindex)
            if missing:
                raise RulesError(f"{rw}: tier names groups {sorted(missing)} the regex does not define")
        rules.append(
            _Rule(
                name=str(item.get("name", f"rule{i}")),
                on=on,
                regex=regex,
                tier=tier,
                templated=templated,
                single_group=tier[1:-1] if templated and re.fullmatch(r"\{\w+\}", tier) else None,
                scan_tokens=scan,
                default=str(item.get("default", "")),
                detects=bool(item.get("detects", True)),
            )
        )

    rucio = None
    if block.get("rucio"):
        r = block["rucio"]
        if not isinstance(r, Mapping) or "regex" not in r or "canonical" not in r:
            raise RulesError(f"{where}.rucio: needs regex and canonical")
        rx = _compile(r["regex"], f"{where}.rucio")
        for g in ("scope_path", "h1", "h2", "name"):
            if g not in rx.groupindex:
                raise RulesError(f"{where}.rucio: regex must define group {g}")
        rucio = (rx, str(r["canonical"]))

    normalise = subs("normalise")
    tier_like = _compile(block["tier_like"], f"{where}.tier_like") if block.get("tier_like") else None
    if any(r.scan_tokens for r in rules) and tier_like is None:
        raise RulesError(f"{where}: rules with scan_tokens need tier_like")

    return _VO(
        name=name,
        detect=[_compile(d, f"{where}.detect[{i}]") for i, d in enumerate(block.get("detect") or [])],
        detect_by_rules=bool(block.get("detect_by_rules", False)),
        normalise=[(rx, sub) for rx, sub, _ in normalise],
        normalise_pieces=[pieces for _, _, pieces in normalise],
        rules=rules,
        default=str(block.get("default", UNKNOWN)),
        base_tier=[(rx, sub) for rx, sub, _ in subs("base_tier")],
        is_mc_when=conditions("is_mc_when"),
        pileup_when=conditions("pileup_when"),
        rucio=rucio,
        tier_like=tier_like,
    )


# ---------------------------------------------------------------------------------------------
# loading and merging


def _read_yaml(source: str | Path, text: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RulesError(f"{source}: not valid YAML: {exc}") from exc
    if not isinstance(data, Mapping) or not isinstance(data.get("vos"), Mapping):
        raise RulesError(f"{source}: expected a mapping with a 'vos' mapping")
    for vo, block in data["vos"].items():
        if not isinstance(block, Mapping):
            raise RulesError(f"{source}: vos.{vo} must be a mapping")
    return dict(data)


def shipped_rules() -> dict[str, Any]:
    text = resources.files("cachescope.tiers").joinpath("rules.yaml").read_text()
    return _read_yaml("cachescope/tiers/rules.yaml", text)


def merge_rules(base: Mapping[str, Any], site: Mapping[str, Any]) -> dict[str, Any]:
    """Site rules over base rules (see rules.yaml header for the merge rules)."""
    merged: dict[str, Any] = {}
    for vo, block in site["vos"].items():
        if vo not in base["vos"] or block.get("replace"):
            merged[vo] = {k: v for k, v in block.items() if k != "replace"}
    for vo, block in base["vos"].items():
        if vo in merged:
            continue
        if vo not in site["vos"]:
            merged[vo] = dict(block)
            continue
        own = site["vos"][vo]
        out = dict(block)
        for key, value in own.items():
            if key in _LIST_KEYS:
                out[key] = list(value or []) + list(block.get(key) or [])
            else:
                out[key] = value
        merged[vo] = out
    return {"version": base.get("version", 1), "vos": merged}


def load_rules(extra_files: Iterable[str | Path] = ()) -> dict[str, Any]:
    rules = shipped_rules()
    for path in extra_files:
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise RulesError(f"{p}: cannot read tier rules: {exc}") from exc
        rules = merge_rules(rules, _read_yaml(p, text))
    return rules


# ---------------------------------------------------------------------------------------------
# classification


class TierClassifier:
    def __init__(self, rules: Mapping[str, Any] | None = None):
        doc = shipped_rules() if rules is None else rules
        self._vos = [_build_vo(str(name), block) for name, block in doc["vos"].items()]
        self._by_name = {vo.name: vo for vo in self._vos}
        self._base_cache: dict[tuple[str, str], str] = {}
        self._spec: str | None | bool = False  # not made yet

    def compiled_spec(self) -> str | None:
        """The rules for the compiled classifier (`_simcore.PathTiers`, which does `path_tier`'s
        work ~6× faster), or None when a regex or template uses syntax the two engines may read
        differently: then every path stays Python's."""
        if self._spec is False:
            self._spec = _compiled_spec(self._vos)
        return self._spec  # type: ignore[return-value]

    @classmethod
    def load(cls, extra_files: Iterable[str | Path] = ()) -> "TierClassifier":
        return cls(load_rules(extra_files))

    @property
    def vo_names(self) -> list[str]:
        return [vo.name for vo in self._vos]

    def classify(self, raw_path: str, vo: str | None = None, fallback_vo: str | None = None) -> TierInfo:
        """Tier of a path. `vo` forces that VO's rules; `fallback_vo` (a record's hint) applies only
        when no VO's rules recognise the path."""
        path = clean_path(raw_path)
        chosen = self._by_name.get(vo) if vo else None
        if chosen is None:
            chosen = self._detect(path)
        if chosen is None and fallback_vo:
            chosen = self._by_name.get(fallback_vo)
        if chosen is None:
            return TierInfo(UNKNOWN, "", path, UNKNOWN, False, False, "")
        return self._apply(chosen, path)

    def path_tier(self, raw_path: str, fallback_vo: str | None = None) -> tuple[str, str, str]:
        """(normalised path, tier, VO) as classify(raw_path, None, fallback_vo) gives them, without
        the base tier and the MC and pile-up flags (what enrichment reads, once per new path)."""
        path = clean_path(raw_path)
        chosen = self._detect(path)
        if chosen is None and fallback_vo:
            chosen = self._by_name.get(fallback_vo)
        if chosen is None:
            return path, UNKNOWN, ""
        return self._apply(chosen, path, full=False)

    def _detect(self, path: str) -> _VO | None:
        for vo in self._vos:
            for rx in vo.detect:
                if rx.search(path):
                    return vo
        for vo in self._vos:
            if vo.detect_by_rules:
                norm, scope, _ = self._normalise(vo, path)
                name = _name_of(norm)
                for rule in vo.rules:
                    text = self._text(rule.on, norm, name, scope)
                    if not text or not rule.regex.search(text):
                        continue
                    if rule.detects:
                        return vo
                    # user.x.DAOD_PHYS...: a tier-like token identifies the VO where 'user.' alone does not
                    if rule.scan_tokens and vo.tier_like is not None:
                        if any(vo.tier_like.match(token) for token in name.split(".")):
                            return vo
        return None

    @staticmethod
    def _text(on: str, path: str, name: str, scope: str | None) -> str | None:
        if on == "path":
            return path
        if on == "name":
            return name
        return scope

    def _normalise(self, vo: _VO, path: str) -> tuple[str, str | None, bool | None]:
        for _, sub in vo.normalise:
            path = sub(path)
        scope: str | None = None
        hash_ok: bool | None = None
        if vo.rucio is not None:
            rx, canonical = vo.rucio
            m = rx.search(path)
            if m:
                g = m.groupdict()
                candidate = g["scope_path"].replace("/", ".")
                hash_ok = rucio_hash(candidate, g["name"]) == g["h1"] + g["h2"]
                if hash_ok:
                    scope = candidate
                    path = canonical.format_map(g)
        if scope is None and "/" not in path and ":" in path:  # a DID scope:name
            did_scope, did_name = path.split(":", 1)
            if did_scope and did_name:
                scope = did_scope
                if vo.rucio is not None:
                    h = rucio_hash(scope, did_name)
                    scope_path = scope.replace(".", "/") if scope.startswith(("user.", "group.")) else scope
                    path = vo.rucio[1].format(scope_path=scope_path, h1=h[:2], h2=h[2:], name=did_name)
        return path, scope, hash_ok

    def _apply(self, vo: _VO, path: str, full: bool = True) -> Any:
        norm, scope, hash_ok = self._normalise(vo, path)
        name = _name_of(norm)
        tier = vo.default
        rule_name = ""
        m = None
        for rule in vo.rules:
            on = rule.on
            text = norm if on == "path" else name if on == "name" else scope
            if text is None:
                continue
            m = rule.regex.search(text)
            if m is None:
                continue
            if rule.scan_tokens:
                tier = rule.default
                like = vo.tier_like
                if like is not None:
                    for token in name.split("."):
                        if like.match(token):
                            tier = token
                            break
            elif rule.single_group is not None:
                tier = m.group(rule.single_group) or ""
            elif rule.templated:
                tier = rule.tier.format_map(_Blank({k: v for k, v in m.groupdict().items() if v is not None}))
            else:
                tier = rule.tier
            rule_name = rule.name
            break
        if not full:
            return norm, tier, vo.name
        base = self._base_cache.get((vo.name, tier))
        if base is None:
            base = tier
            for rx, sub in vo.base_tier:
                if rx.search(tier):
                    base = sub(tier)
                    break
            if len(self._base_cache) < 10_000:
                self._base_cache[(vo.name, tier)] = base
        is_mc = _any_condition(vo.is_mc_when, m, tier, name, scope)
        pileup = _any_condition(vo.pileup_when, m, tier, name, scope)
        return TierInfo(tier, vo.name, norm, base, is_mc, pileup, rule_name, scope, hash_ok)


# ---------------------------------------------------------------------------------------------
# the compiled form (simcore/src/tiers.rs)

# constructs Rust's `regex` reads differently from Python's `re`, or Python-only ones: POSIX and
# nested classes, class set operations, word-start/end escapes, `{,n}`, possessive and atomic
# groups, backreferences, octal and end-of-text escapes, ASCII/locale flags
_NOT_PORTABLE = re.compile(r"\[:|&&|--|~~|\\[<>0-9zZ]|\{,|[*+?}]\+|\(\?>|\(\?P=|\(\?[a-zA-Z]*[aLu]")


def _portable(pattern: str) -> bool:
    if _NOT_PORTABLE.search(pattern):
        return False
    in_class = escaped = False
    for i, c in enumerate(pattern):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == "[":
            if in_class:  # a nested class for Rust, a literal for Python
                return False
            in_class = True
        elif c == "]" and in_class and pattern[i - 1] != "[" and pattern[max(0, i - 2) : i] != "[^":
            in_class = False  # (a ']' first in a class is a literal in both)
    return True


def _format_pieces(template: str, index: Mapping[str, int]) -> list[str | int] | None:
    """A `str.format` template over named values as texts and value numbers; None when it uses
    more than plain `{name}` fields."""
    import string  # here: `cachescope tier` imports this module within its start-up budget

    pieces: list[str | int] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        return None
    for literal, field, spec, conversion in parsed:
        if literal:
            pieces.append(literal)
        if field is None:
            continue
        if spec or conversion or field not in index:
            return None
        pieces.append(index[field])
    return pieces


def _compiled_spec(vos: list[_VO]) -> str | None:
    import json  # here: `cachescope tier` imports this module within its start-up budget

    if not all(_portable(rx.pattern) and not rx.flags & ~re.UNICODE for rx in _all_regexes(vos)):
        return None
    out = []
    for vo in vos:
        rules = []
        for rule in vo.rules:
            r: dict[str, Any] = {"on": rule.on, "regex": rule.regex.pattern, "detects": rule.detects}
            if rule.scan_tokens:
                r.update(kind="scan", default=rule.default)
            elif rule.single_group is not None:
                r.update(kind="group", group=rule.regex.groupindex[rule.single_group])
            elif rule.templated:
                pieces = _format_pieces(rule.tier, rule.regex.groupindex)
                if pieces is None:
                    return None
                r.update(kind="template", pieces=pieces)
            else:
                r.update(kind="literal", tier=rule.tier)
            rules.append(r)
        rucio = None
        if vo.rucio is not None:
            rx, canonical = vo.rucio
            did_names = {"scope_path": 0, "h1": 1, "h2": 2, "name": 3}
            pieces, did = _format_pieces(canonical, rx.groupindex), _format_pieces(canonical, did_names)
            if pieces is None or did is None:
                return None
            rucio = {**{g: rx.groupindex[g] for g in did_names}, "regex": rx.pattern, "canonical": pieces, "did": did}
        out.append({"name": vo.name, "detect": [rx.pattern for rx in vo.detect], "detect_by_rules": vo.detect_by_rules,
                    "normalise": [{"regex": rx.pattern, "replace": pieces}
                                  for (rx, _), pieces in zip(vo.normalise, vo.normalise_pieces)],
                    "rules": rules, "default": vo.default, "rucio": rucio,
                    "tier_like": None if vo.tier_like is None else vo.tier_like.pattern})
    return json.dumps(out)


def _all_regexes(vos: list[_VO]) -> Iterable[re.Pattern[str]]:
    """Every regex the compiled classifier runs (base_tier's are not: it gives no base tier)."""
    for vo in vos:
        yield from vo.detect
        yield from (rx for rx, _ in vo.normalise)
        yield from (r.regex for r in vo.rules)
        if vo.rucio is not None:
            yield vo.rucio[0]
        if vo.tier_like is not None:
            yield vo.tier_like


def _any_condition(conditions: list[tuple[str, re.Pattern[str]]], m: re.Match[str] | None, tier: str, name: str,
                   scope: str | None) -> bool:
    for field, rx in conditions:
        if field == "tier":
            value = tier
        elif field == "name":
            value = name
        elif field == "scope":
            value = scope
        elif m is not None and field in m.re.groupindex:
            value = m.group(field)
        else:
            continue
        if value and rx.search(value):
            return True
    return False


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return ""
