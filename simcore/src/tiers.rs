//! The data-tier classifier's hot path, compiled: a raw path → (normalised path, tier, VO), as
//! `TierClassifier.path_tier` gives them (cachescope/tiers/classifier.py is the reference and
//! the fallback).
//!
//! The rules arrive already compiled by Python (regexes as text, replacement and tier templates
//! as pieces); Python hands them over only when every regex is in the syntax both engines read
//! alike. Texts outside printable ASCII are answered `None` ("ask Python"), so Unicode classes,
//! case folding and Python's extra whitespace never come into play, and neither do the few
//! places where the two regex engines could differ on such input.

use md5::{Digest, Md5};
use regex::{Captures, Regex};
use serde::Deserialize;

pub const UNKNOWN: &str = "UNKNOWN";

/// A template piece: literal text, or capture group `n` of the regex it belongs to.
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum Piece {
    Text(String),
    Group(usize),
}

#[derive(Deserialize, Debug)]
pub struct SubSpec {
    pub regex: String,
    pub replace: Vec<Piece>,
}

#[derive(Deserialize, Debug)]
pub struct RuleSpec {
    /// "path", "name" or "scope"
    pub on: String,
    pub regex: String,
    /// "literal" (tier), "group" (group), "template" (pieces), "scan" (default + tier_like tokens)
    pub kind: String,
    #[serde(default)]
    pub tier: String,
    #[serde(default)]
    pub group: usize,
    #[serde(default)]
    pub pieces: Vec<Piece>,
    #[serde(default)]
    pub default: String,
    pub detects: bool,
}

#[derive(Deserialize, Debug)]
pub struct RucioSpec {
    pub regex: String,
    pub scope_path: usize,
    pub h1: usize,
    pub h2: usize,
    pub name: usize,
    /// `canonical.format_map(groupdict)`: groups of `regex`
    pub canonical: Vec<Piece>,
    /// `canonical.format(scope_path=, h1=, h2=, name=)` for a DID: 0..4 index those four
    pub did: Vec<Piece>,
}

#[derive(Deserialize, Debug)]
pub struct VoSpec {
    pub name: String,
    pub detect: Vec<String>,
    pub detect_by_rules: bool,
    pub normalise: Vec<SubSpec>,
    pub rules: Vec<RuleSpec>,
    pub default: String,
    pub rucio: Option<RucioSpec>,
    pub tier_like: Option<String>,
}

enum On {
    Path,
    Name,
    Scope,
}

enum Kind {
    Literal(String),
    Group(usize),
    Template(Vec<Piece>),
    Scan(String),
}

struct Rule {
    on: On,
    regex: Regex,
    kind: Kind,
    detects: bool,
}

struct Rucio {
    regex: Regex,
    scope_path: usize,
    h1: usize,
    h2: usize,
    name: usize,
    canonical: Vec<Piece>,
    did: Vec<Piece>,
}

struct Vo {
    name: String,
    detect: Vec<Regex>,
    detect_by_rules: bool,
    normalise: Vec<(Regex, Vec<Piece>)>,
    rules: Vec<Rule>,
    default: String,
    rucio: Option<Rucio>,
    tier_like: Option<Regex>,
}

/// Compiled rules of every VO, in the order Python tries them.
pub struct PathTiers {
    vos: Vec<Vo>,
    url_prefix: Regex,
}

fn compile(rx: &str) -> Result<Regex, String> {
    Regex::new(rx).map_err(|e| format!("regex {rx:?}: {e}"))
}

/// Python's `str.isspace` on the characters `strip()` removes (the White_Space set plus the
/// information separators U+001C..U+001F).
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Printable ASCII: the texts both regex engines read alike.
fn plain(s: &str) -> bool {
    s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

fn expand(pieces: &[Piece], caps: &Captures, unmatched: &str, out: &mut String) {
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Group(g) => out.push_str(caps.get(*g).map_or(unmatched, |m| m.as_str())),
        }
    }
}

/// `rx.sub(repl, s, count=1)` (unmatched groups as "").
fn sub_first(rx: &Regex, pieces: &[Piece], s: &str) -> String {
    match rx.captures(s) {
        None => s.to_string(),
        Some(caps) => {
            let m = caps.get(0).unwrap();
            let mut out = String::with_capacity(s.len() + 16);
            out.push_str(&s[..m.start()]);
            expand(pieces, &caps, "", &mut out);
            out.push_str(&s[m.end()..]);
            out
        }
    }
}

/// md5("scope:name")[0:4] in hex: rucio's two hash directories.
pub fn rucio_hash(scope: &str, name: &str) -> String {
    let mut h = Md5::new();
    h.update(scope.as_bytes());
    h.update(b":");
    h.update(name.as_bytes());
    let d = h.finalize();
    format!("{:02x}{:02x}", d[0], d[1])
}

fn name_of(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name.contains(':') && !path.contains('/') {
        return name.split_once(':').map_or(name, |(_, n)| n);
    }
    name
}

/// The normalised path, the rucio scope; None: ask Python (a text it must judge).
struct Normalised {
    path: String,
    scope: Option<String>,
}

impl PathTiers {
    pub fn new(vos: Vec<VoSpec>) -> Result<Self, String> {
        let mut out = Vec::with_capacity(vos.len());
        for v in vos {
            let mut rules = Vec::with_capacity(v.rules.len());
            for r in v.rules {
                let kind = match r.kind.as_str() {
                    "literal" => Kind::Literal(r.tier),
                    "group" => Kind::Group(r.group),
                    "template" => Kind::Template(r.pieces),
                    "scan" => Kind::Scan(r.default),
                    k => return Err(format!("unknown rule kind {k:?}")),
                };
                let on = match r.on.as_str() {
                    "path" => On::Path,
                    "name" => On::Name,
                    "scope" => On::Scope,
                    o => return Err(format!("unknown match {o:?}")),
                };
                rules.push(Rule { on, regex: compile(&r.regex)?, kind, detects: r.detects });
            }
            let rucio = match v.rucio {
                None => None,
                Some(r) => Some(Rucio {
                    regex: compile(&r.regex)?,
                    scope_path: r.scope_path,
                    h1: r.h1,
                    h2: r.h2,
                    name: r.name,
                    canonical: r.canonical,
                    did: r.did,
                }),
            };
            out.push(Vo {
                name: v.name,
                detect: v.detect.iter().map(|d| compile(d)).collect::<Result<_, _>>()?,
                detect_by_rules: v.detect_by_rules,
                normalise: v
                    .normalise
                    .into_iter()
                    .map(|s| Ok((compile(&s.regex)?, s.replace)))
                    .collect::<Result<_, String>>()?,
                rules,
                default: v.default,
                rucio,
                tier_like: v.tier_like.as_deref().map(compile).transpose()?,
            });
        }
        Ok(PathTiers { vos: out, url_prefix: compile(r"^(?:/*[A-Za-z][A-Za-z0-9+.\-]*://[^/]*)+")? })
    }

    /// `clean_path`: strip URL schemes and hosts (also nested), unwrap SRM `?SFN=`, drop the
    /// query, collapse `//`.
    pub fn clean_path(&self, raw: &str) -> String {
        let mut p: &str = raw.trim_matches(py_space);
        let owned;
        if p.contains("SFN=") {
            if let Some(at) = p.find("?SFN=").into_iter().chain(p.find("&SFN=")).min() {
                p = &p[at + 5..];
                if let Some(amp) = p.find('&') {
                    p = &p[..amp];
                }
            }
        }
        if p.contains("://") {
            owned = self.url_prefix.replace(p, "").into_owned();
            p = &owned;
        }
        if let Some(q) = p.find('?') {
            p = &p[..q];
        }
        let mut out = String::with_capacity(p.len() + 1);
        let mut prev_slash = false;
        for c in p.chars() {
            if c == '/' && prev_slash {
                continue;
            }
            prev_slash = c == '/';
            out.push(c);
        }
        if !out.is_empty() && !out.starts_with('/') && out.contains('/') {
            out.insert(0, '/');
        }
        out
    }

    fn normalise(&self, vo: &Vo, path: &str) -> Option<Normalised> {
        let mut path = path.to_string();
        for (rx, pieces) in &vo.normalise {
            path = sub_first(rx, pieces, &path);
        }
        if !plain(&path) {
            return None;
        }
        let mut scope = None;
        if let Some(r) = &vo.rucio {
            if let Some(caps) = r.regex.captures(&path) {
                let group = |i: usize| caps.get(i).map(|m| m.as_str());
                // Python would fail on an unmatched group here: its answer, not ours
                let (sp, h1, h2, name) = (group(r.scope_path)?, group(r.h1)?, group(r.h2)?, group(r.name)?);
                let candidate = sp.replace('/', ".");
                let h = rucio_hash(&candidate, name);
                if h == format!("{h1}{h2}") {
                    let mut canon = String::with_capacity(path.len() + 8);
                    expand(&r.canonical, &caps, "None", &mut canon);
                    scope = Some(candidate);
                    path = canon;
                }
            }
        }
        if scope.is_none() && !path.contains('/') && path.contains(':') {
            let (did_scope, did_name) = path.split_once(':').unwrap();
            if !did_scope.is_empty() && !did_name.is_empty() {
                let (did_scope, did_name) = (did_scope.to_string(), did_name.to_string());
                if let Some(r) = &vo.rucio {
                    let h = rucio_hash(&did_scope, &did_name);
                    let scope_path = if did_scope.starts_with("user.") || did_scope.starts_with("group.") {
                        did_scope.replace('.', "/")
                    } else {
                        did_scope.clone()
                    };
                    let values = [scope_path.as_str(), &h[..2], &h[2..], did_name.as_str()];
                    let mut canon = String::new();
                    for p in &r.did {
                        match p {
                            Piece::Text(t) => canon.push_str(t),
                            Piece::Group(i) => canon.push_str(values.get(*i)?),
                        }
                    }
                    path = canon;
                }
                scope = Some(did_scope);
            }
        }
        if !plain(&path) {
            return None;
        }
        Some(Normalised { path, scope })
    }

    fn text<'a>(on: &On, n: &'a Normalised, name: &'a str) -> Option<&'a str> {
        match on {
            On::Path => Some(&n.path),
            On::Name => Some(name),
            On::Scope => n.scope.as_deref(),
        }
    }

    /// `_detect`: the VO whose rules recognise the path; Err(()) when Python must answer.
    fn detect(&self, path: &str) -> Result<Option<&Vo>, ()> {
        for vo in &self.vos {
            if vo.detect.iter().any(|rx| rx.is_match(path)) {
                return Ok(Some(vo));
            }
        }
        for vo in &self.vos {
            if !vo.detect_by_rules {
                continue;
            }
            let n = self.normalise(vo, path).ok_or(())?;
            let name = name_of(&n.path);
            for rule in &vo.rules {
                let Some(text) = Self::text(&rule.on, &n, name) else { continue };
                if text.is_empty() || !rule.regex.is_match(text) {
                    continue;
                }
                if rule.detects {
                    return Ok(Some(vo));
                }
                if let (Kind::Scan(_), Some(like)) = (&rule.kind, &vo.tier_like) {
                    if name.split('.').any(|t| starts_match(like, t)) {
                        return Ok(Some(vo));
                    }
                }
            }
        }
        Ok(None)
    }

    /// `TierClassifier.path_tier(raw, fallback_vo)`: (normalised path, tier, VO name), or None
    /// when the answer is Python's to give (a text outside printable ASCII, an unmatched group
    /// Python would fail on).
    pub fn path_tier(&self, raw: &str, fallback_vo: Option<&str>) -> Option<(String, String, String)> {
        if !plain(raw) {
            return None;
        }
        let path = self.clean_path(raw);
        let mut chosen = self.detect(&path).ok()?;
        if chosen.is_none() {
            if let Some(f) = fallback_vo.filter(|f| !f.is_empty()) {
                chosen = self.vos.iter().find(|v| v.name == f);
            }
        }
        let Some(vo) = chosen else { return Some((path, UNKNOWN.to_string(), String::new())) };
        let n = self.normalise(vo, &path)?;
        let name = name_of(&n.path);
        let mut tier = vo.default.clone();
        for rule in &vo.rules {
            let Some(text) = Self::text(&rule.on, &n, name) else { continue };
            // is_match runs the fast automaton; groups (slower) only for the rule that matched
            if !rule.regex.is_match(text) {
                continue;
            }
            tier = match &rule.kind {
                Kind::Scan(default) => match &vo.tier_like {
                    Some(like) => name.split('.').find(|t| starts_match(like, t)).unwrap_or(default).to_string(),
                    None => default.clone(),
                },
                Kind::Group(g) => {
                    let caps = rule.regex.captures(text)?;
                    caps.get(*g).map_or("", |m| m.as_str()).to_string()
                }
                Kind::Template(pieces) => {
                    let caps = rule.regex.captures(text)?;
                    let mut t = String::new();
                    expand(pieces, &caps, "", &mut t);
                    t
                }
                Kind::Literal(t) => t.clone(),
            };
            break;
        }
        if !plain(&tier) {
            return None;
        }
        Some((n.path, tier, vo.name.clone()))
    }
}

/// Python's `rx.match(text)`: a match that starts at 0 (the leftmost match starts there when
/// any does).
fn starts_match(rx: &Regex, text: &str) -> bool {
    rx.find(text).is_some_and(|m| m.start() == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small ATLAS rule set, in the JSON form `TierClassifier.compiled_spec` writes.
    fn atlas() -> PathTiers {
        let spec = r#"[{
            "name": "atlas", "detect": ["^/atlas/"], "detect_by_rules": true, "default": "UNKNOWN",
            "normalise": [{"regex": "^.*?(/atlas/)", "replace": [1]}],
            "rules": [
                {"on": "name", "regex": "^(?:mc|data)\\d+_\\w+\\.\\d+\\.\\w+\\.\\w+\\.(?P<tier>[A-Z][A-Z0-9_]*)\\.",
                 "kind": "group", "group": 1, "detects": true},
                {"on": "scope", "regex": "^user\\.", "kind": "scan", "default": "USER", "detects": false}
            ],
            "rucio": {"regex": "^/atlas/rucio/(?P<scope_path>.+)/(?P<h1>[0-9a-f]{2})/(?P<h2>[0-9a-f]{2})/(?P<name>[^/]+)$",
                      "scope_path": 1, "h1": 2, "h2": 3, "name": 4,
                      "canonical": ["/atlas/rucio/", 1, "/", 2, "/", 3, "/", 4],
                      "did": ["/atlas/rucio/", 0, "/", 1, "/", 2, "/", 3]},
            "tier_like": "^(?:DAOD_[A-Z0-9]+|AOD|EVNT)$"
        }]"#;
        PathTiers::new(serde_json::from_str(spec).unwrap()).unwrap()
    }

    #[test]
    fn rucio_hash_is_md5_of_scope_colon_name() {
        // md5("user.jdoe:user.jdoe.1._000001.root") = 0a10ae3c…
        assert_eq!(rucio_hash("user.jdoe", "user.jdoe.1._000001.root"), "0a10");
    }

    #[test]
    fn clean_path_strips_urls_queries_and_double_slashes() {
        let t = atlas();
        assert_eq!(t.clean_path("  root://host:1094//atlas//x/y.root?x=1 "), "/atlas/x/y.root");
        assert_eq!(t.clean_path("srm://se/srm/managerv2?SFN=/pnfs/a//b&x=1"), "/pnfs/a/b");
        assert_eq!(t.clean_path("atlas/x"), "/atlas/x");
        assert_eq!(t.clean_path("scope:name"), "scope:name");
    }

    #[test]
    fn a_did_and_its_rucio_path_classify_alike() {
        let t = atlas();
        let name = "mc16_13TeV.123456.Gen.recon.AOD.e1_s2_r3";
        let (path, tier, vo) = t.path_tier(&format!("mc16_13TeV:{name}"), None).unwrap();
        assert_eq!((tier.as_str(), vo.as_str()), ("AOD", "atlas"));
        assert_eq!(t.path_tier(&path, None).unwrap(), (path.clone(), tier, vo));
        let h = rucio_hash("mc16_13TeV", name);
        assert_eq!(path, format!("/atlas/rucio/mc16_13TeV/{}/{}/{name}", &h[..2], &h[2..]));
    }

    #[test]
    fn user_scope_takes_a_tier_like_token_and_text_outside_ascii_is_pythons() {
        let t = atlas();
        let (_, tier, _) = t.path_tier("user.jdoe:user.jdoe.x.DAOD_PHYS.root", None).unwrap();
        assert_eq!(tier, "DAOD_PHYS");
        // `detects: false`: without a tier-like token the scope alone does not name the VO
        assert_eq!(t.path_tier("user.jdoe:user.jdoe.x.root", None).unwrap().1, UNKNOWN);
        let (_, tier, vo) = t.path_tier("user.jdoe:user.jdoe.x.root", Some("atlas")).unwrap();
        assert_eq!((tier.as_str(), vo.as_str()), ("USER", "atlas"));
        assert!(t.path_tier("/atlas/é", None).is_none());
        assert!(t.path_tier("/atlas/a\tb", None).is_none());
        assert_eq!(t.path_tier("/cms/x", None).unwrap().1, UNKNOWN);
        assert_eq!(t.path_tier("/cms/x", Some("atlas")).unwrap().2, "atlas");
    }
}
