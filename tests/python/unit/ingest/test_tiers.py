from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import pytest
from typer.testing import CliRunner

from cli import app
from cachescope.tiers import RulesError, TierClassifier, clean_path, rucio_hash, rucio_path
from support.data import FIXTURES, fixture_lines

VECTORS = [line.split("\t") for line in fixture_lines("naming_test_vectors.tsv")]
runner = CliRunner()


@pytest.fixture(scope="module")
def classifier():
    return TierClassifier()


def test_every_vector_is_in_the_fixture():
    assert len(VECTORS) == 61  # 53 from the samples, 8 shapes added (PanDA blocks, projects without energy)
    assert all(len(v) == 6 for v in VECTORS)


@pytest.mark.parametrize("tier, base, vo, is_mc, pileup, path", VECTORS, ids=[v[5][-60:] for v in VECTORS])
def test_naming_vector(classifier, tier, base, vo, is_mc, pileup, path):
    info = classifier.classify(path)
    assert (info.tier, info.base_tier, info.vo, int(info.is_mc), int(info.pileup)) == (
        tier, base, vo, int(is_mc), int(pileup))


def test_cli_prints_tier_tab_path_for_every_vector():
    paths = [v[5] for v in VECTORS]
    result = runner.invoke(app, ["tier", *paths])
    assert result.exit_code == 0, result.output
    assert result.stdout == "".join(f"{v[0]}\t{v[5]}\n" for v in VECTORS)


def test_cli_reads_paths_from_stdin():
    paths = [v[5] for v in VECTORS[:5]]
    result = runner.invoke(app, ["tier"], input="\n".join(paths) + "\n\n")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"{v[0]}\t{v[5]}" for v in VECTORS[:5]]


def test_cli_details_json():
    result = runner.invoke(app, ["tier", "--details", "/eos/cms/store/mc/Run3/X/MINIAODSIM/Y-v1/0/a.root"])
    assert '"tier":"MINIAODSIM","base_tier":"MINIAOD","vo":"cms","is_mc":true,"pileup":false' in result.stdout
    assert '"path":"/store/mc/Run3/X/MINIAODSIM/Y-v1/0/a.root"' in result.stdout


def test_rucio_paths_are_canonical_whatever_the_prefix(classifier):
    name = "EVNT.18541195._000368.pool.root.1"
    canonical = "/atlas/rucio/mc16_13TeV/61/1d/" + name
    for p in (
        "atlas/rucio/mc16_13TeV/61/1d/" + name,
        "/atlas:datadisk/rucio/mc16_13TeV/61/1d/" + name,
        "root://fax.mwt2.org:1094//pnfs/uchicago.edu/atlasdatadisk/rucio/mc16_13TeV/61/1d/" + name,
        "root://a.b:1//root://c.d:2//xrootd/atlas/atlasdatadisk/rucio/mc16_13TeV/61/1d/" + name + "?authz=X",
        "srm://se.example.org:8443/srm/managerv2?SFN=/pnfs/example.org/data/atlas/atlasdatadisk/rucio/mc16_13TeV/61/1d/" + name,
        "mc16_13TeV:" + name,
    ):
        info = classifier.classify(p)
        assert (info.path, info.tier, info.scope) == (canonical, "EVNT", "mc16_13TeV"), p
    assert rucio_path("mc16_13TeV", name) == canonical
    assert rucio_path("user.galhardo", "x.root").startswith("/atlas/rucio/user/galhardo/")


def test_rucio_hash_is_verified(classifier):
    good = "/pnfs/x/rucio/user/galhardo/41/d4/user.galhardo.074789._00898.12_SET_2013_FCNCqzl_Pileup_OffsetMu_down.root"
    assert rucio_hash("user.galhardo", good.rsplit("/", 1)[1]) == "41d4"
    info = classifier.classify(good)
    assert info.rucio_hash_ok is True and info.scope == "user.galhardo" and info.path.startswith("/atlas/rucio/user/")
    bad = good.replace("/41/d4/", "/41/d5/")
    info = classifier.classify(bad)
    assert info.rucio_hash_ok is False and info.scope is None
    assert info.path == "/pnfs/x/rucio/user/galhardo/41/d5/" + good.rsplit("/", 1)[1]  # not rewritten
    assert info.tier == "USER"  # the name still classifies


def test_atlas_name_rules(classifier):
    cases = {
        "mc16_13TeV.410470.PhPy8EG_A14_ttbar_hdamp258p75_nonallhad.deriv.DAOD_PHYS.e6337_s3126_r10201_p4172": "DAOD_PHYS",
        "user.jdoe.DAOD_PHYSLITE.12345._000001.root": "DAOD_PHYSLITE",
        "group.phys-higgs.AOD.x.root": "AOD",
        "/dpm/cern.ch/home/atlas/atlaslocalgroupdisk/group.phys-higgs.mytree.root": "GROUP",
        "group.phys-higgs.mytree.root": "UNKNOWN",  # nothing says ATLAS
        "/atlas/rucio/panda/8a/c7/panda.um.user.kenelson.32026894._000001.tree.root": "USER",
        "NTUP_PILEUP.12345678._000001.root.1": "NTUP_PILEUP",
        "/home/someone/user.cfg": "UNKNOWN",
    }
    for path, tier in cases.items():
        assert classifier.classify(path).tier == tier, path
    assert classifier.classify("/home/someone/user.cfg").vo == ""


def test_cms_lfn_prefixes_and_tiers(classifier):
    info = classifier.classify("https://ccdavcms.in2p3.fr:2880/disk/data/store/mc/RunIISummer20UL17RECO/TT/AODSIM/106X-v2/2430003/6C.root")
    assert (info.tier, info.base_tier, info.is_mc, info.path) == (
        "AODSIM", "AOD", True, "/store/mc/RunIISummer20UL17RECO/TT/AODSIM/106X-v2/2430003/6C.root")
    assert classifier.classify("/store/mc/Run3/Neutrino_E-10_gun/PREMIX/X-v1/0/a.root").pileup is True
    assert classifier.classify("/store/mc/Run3/Neutrino_E-10_gun/GEN-SIM/X-v1/0/a.root").pileup is True
    assert classifier.classify("/store/mc/Run3/TT/NANOAODSIM/X-v1/0/a.root").base_tier == "NANOAOD"
    assert classifier.classify("/store/mc/Run3/TT/GEN-SIM/X-v1/0/a.root").base_tier == "GEN-SIM"
    assert classifier.classify("//store/file.root").path == "/store/file.root"
    assert classifier.classify("/store/data/Run2023C/JetMET0/NANOAOD/X-v1/0/a.root").is_mc is False


def test_clean_path():
    assert clean_path("https://u113@localhost:8443//test/file?&authz=REDACTED") == "/test/file"
    assert clean_path("atlas/rucio/x") == "/atlas/rucio/x"
    assert clean_path("bare.name") == "bare.name"


def test_site_yaml_extends_and_overrides(tmp_path: Path):
    site = tmp_path / "site.yaml"
    site.write_text(
        "vos:\n"
        "  cms:\n"
        "    rules:\n"
        "      - {name: t3, regex: '^/store/cmst3/', tier: T3}\n"
        "  lhcb:\n"
        "    detect: ['^/lhcb/']\n"
        "    rules:\n"
        "      - {name: dst, match: name, regex: '\\.(?P<t>[A-Z]+)$', tier: '{t}'}\n"
    )
    c = TierClassifier.load([site])
    assert c.classify("/eos/cms/store/cmst3/group/wmass/x.root").tier == "T3"
    assert c.classify("/store/data/Run2010A/Cosmics/RECO/v4/000/a.root").tier == "RECO"  # shipped rules kept
    info = c.classify("/lhcb/LHCb/Collision24/B2OC.DST")
    assert (info.vo, info.tier) == ("lhcb", "DST")
    result = runner.invoke(app, ["tier", "--rules", str(site), "/store/cmst3/a.root"])
    assert result.stdout == "T3\t/store/cmst3/a.root\n"


def test_site_yaml_replace_drops_shipped_block(tmp_path: Path):
    site = tmp_path / "site.yaml"
    site.write_text("vos:\n  cms:\n    replace: true\n    detect: ['/store/']\n    default: CMSFILE\n")
    c = TierClassifier.load([site])
    assert c.classify("/store/mc/Fall10/X/AODSIM/Y-v1/0/a.root").tier == "CMSFILE"


@pytest.mark.parametrize(
    "text, message",
    [
        ("vos: {cms: {rules: [{regex: '(', tier: X}]}}", "bad regex"),
        ("vos: {cms: {rules: [{regex: 'a', tier: '{nope}'}]}}", "nope"),
        ("vos: {cms: {rules: [{regex: 'a', tier: X, on: path}]}}", "unknown keys"),
        ("vos: {cms: {colour: red}}", "unknown keys"),
        ("[1, 2]", "vos"),
    ],
)
def test_bad_site_rules_name_the_problem(tmp_path: Path, text: str, message: str):
    site = tmp_path / "site.yaml"
    site.write_text(text)
    with pytest.raises(RulesError, match=message):
        TierClassifier.load([site])
    result = runner.invoke(app, ["tier", "--rules", str(site), "/store/x"])
    assert result.exit_code == 2 and message.split()[0] in result.stderr


def test_fixture_names_its_source():
    head = (FIXTURES / "naming_test_vectors.tsv").read_text().splitlines()[0]
    assert "naming_test_vectors.txt" in head


def test_tier_fast_path_matches_the_typer_command(tmp_path):
    # `cachescope tier …` runs without typer (start-up budget); it must answer as the typer command
    import subprocess
    import sys
    from pathlib import Path

    from typer.testing import CliRunner

    exe = str(Path(sys.executable).parent / "cachescope")
    paths = ["/store/mc/Run3Summer22/TTto2L2Nu/AODSIM/124X_v1/2550000/a.root",
             "mc23_13p6TeV:DAOD_PHYS.36011922._000123.pool.root.1", "/eos/unknown/file"]
    for extra in ([], ["--details"], ["--vo", "cms"]):
        fast = subprocess.run([exe, "tier", *paths, *extra], capture_output=True, text=True)
        slow = CliRunner().invoke(app, ["tier", *paths, *extra])
        assert fast.returncode == slow.exit_code == 0, fast.stderr
        assert fast.stdout == slow.stdout
    bad = subprocess.run([exe, "tier", "--nope", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    missing = subprocess.run([exe, "tier", "--rules", str(tmp_path / "none.yaml"), "x"], capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.startswith("cachescope tier: ")


def test_path_tier_is_classify_without_the_flags(classifier):
    """`path_tier` (what enrichment calls once per new path) gives classify()'s path, tier and VO:
    naming vectors, generated ATLAS/CMS names, URLs, DIDs, unknown paths, with and without a VO hint."""
    from ingest.generate import make_workload, render

    w = make_workload(3000, days=1, sites=2, servers=2, seed=3)
    import orjson

    paths = [v[5] for v in VECTORS]
    paths += [orjson.loads(line)["lfn"] for _, _, _, line in render("xrootd-gstream", w) if '"lfn"' in line]
    paths += ["root://h.cern.ch:1094//store/mc/A/B/AODSIM/x/f.root?svcClass=x", "mc16_13TeV:AOD.1._000001.pool.root.1",
              "/no/vo/here.txt", "", "user.jdoe:user.jdoe.DAOD_PHYS.1._000001.root", "/atlas/rucio/mc16_13TeV/00/00/HITS.1._1.root"]
    assert len(paths) > 1000
    for p in paths:
        for hint in (None, "atlas", "cms", "nosuchvo"):
            info = classifier.classify(p, None, hint)
            assert classifier.path_tier(p, hint) == (info.path, info.tier, info.vo), (p, hint)


def _paths_of_every_shape() -> list[str]:
    """Naming vectors, generated ATLAS/CMS accesses, URLs, SRM, DIDs, rucio paths with right and
    wrong hashes, non-ASCII and control characters, unknown paths."""
    import orjson

    from ingest.generate import make_workload, render

    w = make_workload(3000, days=1, sites=2, servers=2, seed=3)
    paths = [v[5] for v in VECTORS]
    paths += [orjson.loads(line)["lfn"] for _, _, _, line in render("xrootd-gstream", w) if '"lfn"' in line]
    paths += [rucio_path(s, n) for s, n in (("mc16_13TeV", "HITS.123._000001.pool.root.1"),
                                            ("user.jdoe", "user.jdoe.x.DAOD_PHYS.root"), ("group.phys-exotics", "g.1"))]
    paths += ["root://h.cern.ch:1094//store/mc/A/B/AODSIM/x/f.root?svcClass=x", "mc16_13TeV:AOD.1._000001.pool.root.1",
              "srm://se.example:8443/srm/managerv2?SFN=/pnfs/x//atlas/rucio/mc16_13TeV/aa/bb/f.root&y=1",
              "davs://a//root://b//atlas/x", "/no/vo/here.txt", "", " ", ":", "a:", ":b", "/", "//", "user.jdoe:user.jdoe.x.root",
              "user.jdoe:user.jdoe.DAOD_PHYS.1._000001.root", "/atlas/rucio/mc16_13TeV/00/00/HITS.1._1.root",
              "/store/user/é/f.root", "/store/mc/A/B/AOD\tSIM/x/f.root", "\x1c/store/mc/A/B/AOD/x/f.root",
              "/store/mc/Run/Prim/MINIAODSIM/v1/0000/f.root\n", "panda.um.user.jdoe.DAOD_PHYS.1.root",
              "data18_13TeV.00348885.physics_Main.daq.RAW._lb0001._SFO-1._0001.data", "/Prim/Proc-v1/AOD"]
    return paths


def _both(classifier):
    """The compiled classifier over `classifier`'s rules, the Python answer it must give, and the
    paths it handed to Python."""
    from cachescope._simcore import PathTiers
    from cachescope.events import file_id_of

    def python(path, hint=None):
        norm, tier, vo = classifier.path_tier(path, hint)
        return norm, file_id_of(norm), tier, vo

    handed: list[str] = []

    def fallback(path, hint=None):
        handed.append(path)
        return python(path, hint)

    return PathTiers(classifier.compiled_spec(), fallback).resolve, python, handed


def test_compiled_classifier_gives_what_python_gives(classifier):
    compiled, python, handed = _both(classifier)
    paths = _paths_of_every_shape()
    assert len(paths) > 1000
    for p in paths:
        for hint in (None, "atlas", "cms", "nosuchvo"):
            assert compiled(p, hint) == python(p, hint), (p, hint)
    # the compiled side answered every printable-ASCII path itself
    assert set(handed) == {p for p in paths if not (p.isascii() and p.isprintable())}


_PIECES = ["atlas", "rucio", "store", "mc", "data", "user", "group", "jdoe", "mc16_13TeV", "data18_13TeV", "AOD", "AODSIM",
           "DAOD_PHYS", "MINIAODSIM", "HITS", "EVNT", "log", "panda", "um", "00348885", "123456", "_000001", "pool", "root",
           "root://h:1094/", "davs://x/", "?a=1", "?SFN=", "&", "ab", "0f", "c3", "tid01", "-v1", "Run2", "temp", "lhe"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(["/", ".", ":", "_", "", "//"])), max_size=12),
       st.sampled_from([None, "atlas", "cms"]))
def test_compiled_classifier_agrees_on_generated_paths(parts, hint):
    compiled, python, _ = _both(_CLASSIFIER)
    path = "".join(a + b for a, b in parts)
    assert compiled(path, hint) == python(path, hint)
    scope = path.split("/")[0] or "user.jdoe"
    canonical = rucio_path(scope.replace(":", "."), path.replace("/", "_") or "f")  # a hash that verifies
    assert compiled(canonical, hint) == python(canonical, hint)


@pytest.mark.filterwarnings("ignore:Possible nested set:FutureWarning")
def test_site_rules_compile_and_agree_or_stay_python(tmp_path: Path):
    """Templated tiers and named replacement groups compile; a rule in syntax Rust's engine may
    read differently (an inline flag, a backreference, a nested class) keeps the whole
    classifier in Python, and enrichment then uses Python."""
    from cachescope.config import load_config
    from ingest.enrich import Enricher

    site = tmp_path / "site.yaml"
    site.write_text("""vos:
  lab:
    detect: ['^/lab/']
    normalise:
      - {regex: '^/lab/(?P<area>scratch|tmp)/', replace: '/lab/\\g<area>-area/'}
    rules:
      - {name: runs, regex: '^/lab/(?P<kind>raw|reco)/(?P<era>\\d{4})/', tier: '{kind}-{era}'}
      - {name: area, regex: '^/lab/(?P<area>[a-z]+)-area/', tier: '{area}'}
""")
    c = TierClassifier.load([site])
    assert c.compiled_spec() is not None
    compiled, python, handed = _both(c)
    got = {p: compiled(p) for p in ["/lab/raw/2024/x.root", "/lab/reco/1999/y", "/lab/scratch/a", "/lab/tmp/b",
                                    "/lab/other", "/atlas/x"]}
    assert handed == []  # every one answered compiled
    assert got == {p: python(p) for p in got}
    assert got["/lab/raw/2024/x.root"][2] == "raw-2024" and got["/lab/tmp/b"][:3:2] == ("/lab/tmp-area/b", "tmp")
    for regex in ["(?i)^/lab/raw/", "^/lab/(a)\\\\1", "^/lab/[[a]]", "^/lab/x{,2}"]:
        site.write_text(f"vos:\n  lab:\n    detect: ['^/lab/']\n    rules:\n      - {{name: r, regex: '{regex}', tier: RAW}}\n")
        c = TierClassifier.load([site])
        assert c.compiled_spec() is None, regex
        enrich = Enricher("x", config=load_config(), classifier=c)
        assert enrich.resolve_path == enrich._resolve_in_python
        assert enrich.resolve_path("/lab/raw/f")[2] in ("RAW", "UNKNOWN")


_CLASSIFIER = TierClassifier()
