"""The built-in page in a real browser (Debian's chromium driven by Playwright) against
`cachescope serve` over a store the real pipeline filled: it loads, the charts draw with data,
the selectors change the series, and the what-if form shows the API's answer. Screenshots are
kept in var/test-artifacts/page/."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from cachescope.config import load_config
from runners.embedded import replay
from cachescope.store import EmbeddedStore
from ingest.generate import make_workload, write
from ingest.scenarios import apply

REPO = Path(__file__).resolve().parents[4]
CLI = str(Path(sys.executable).parent / "cachescope")
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = REPO / "var" / "test-artifacts" / "page"



def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, body: dict | None = None):
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="GET" if body is None else "POST")
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def _serve(tmp: Path, files: list[Path], config: dict, cli: str = CLI, cwd: Path | None = None):
    """Replay `files` with the site configuration `config` into a store, serve it (`cli serve`, run
    in `cwd`); yields the URL."""
    (tmp / "site.yaml").write_text(yaml.safe_dump(config))
    store = EmbeddedStore(tmp / "store")
    replay(files, "xrootd-gstream", config=load_config(tmp / "site.yaml"), store=store)
    store.close()
    port = _free_port()
    log = open(tmp / "serve.log", "w")
    proc = subprocess.Popen([cli, "serve", "--store", str(tmp / "store"), "--port", str(port)], stdout=log,
                            stderr=subprocess.STDOUT, cwd=cwd)
    url = f"http://127.0.0.1:{port}"
    while True:  # start-up: opening the store, however long it takes; a server that exits ends the wait
        if proc.poll() is not None:
            pytest.fail(f"cachescope serve exited: {(tmp / 'serve.log').read_text()}")
        try:
            if _get(url + "/healthz").get("status") == "ok":
                break
        except OSError:
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait()
    log.close()


def _alert_rule(**extra) -> dict:
    return {"name": "hit-drop", "kind": "drop", "drop": 0.3, "over": "1h", "for": "15m", "policy": "lru",
            "size": "10TB", **extra}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not (REPO / "api" / "static" / "vendor" / "uPlot.iife.min.js").exists():
        pytest.fail("the page's chart library is missing: bash scripts/page-assets (uPlot from npm)")
    tmp = tmp_path_factory.mktemp("page")
    w, _ = apply("hit-drop", make_workload(30_000, days=2, sites=1, servers=2, seed=13))
    files = write("xrootd-gstream", w, tmp / "logs", single_file=False)
    yield from _serve(tmp, files, {
        "site": w.sites[0], "pipeline": {"shadow": {"policies": ["lru", "arc", "xcache"], "sizes": ["2TB", "10TB"]},
                                         "curve": {"points": 16}},
        "alerts": {"defaults": False, "rules": [_alert_rule()]}})


@pytest.fixture(scope="module")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: bash scripts/page-assets --browser (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


def _open(browser, server: str):
    """The page loaded in a new context; yields it, then checks it raised no error, logged no
    console error (a 404, a CSP refusal) and fetched nothing from elsewhere."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1800})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    external: list[str] = []
    pg.on("request", lambda r: external.append(r.url) if not r.url.startswith(server) else None)
    pg.goto(server + "/")
    pg.wait_for_selector("body[data-ready='1']", timeout=0)
    yield pg
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert not errors, errors
    assert not external, f"the page fetched from elsewhere: {external}"
    ctx.close()


@pytest.fixture
def page(browser, server):
    yield from _open(browser, server)


def _chart(pg, key: str) -> dict:
    return pg.evaluate(f"""() => {{
        const u = window.cachescope.charts[{key!r}];
        return {{labels: u.series.slice(1).map(s => s.label),
                 points: u.data[0].length,
                 values: u.data.slice(1).flat().filter(v => v !== null && !Number.isNaN(v)).length}};
    }}""")


def test_page_loads_and_every_chart_draws_with_data(page):
    eff = _chart(page, "efficiency")
    # at first: the group's first policy (/v1/configs lists them by name) at its largest size
    assert eff["labels"] == ["arc 10 TB"] and eff["points"] > 24 and eff["values"] > 24
    curve = _chart(page, "curve")
    assert curve["points"] > 4 and curve["values"] >= 2 * curve["points"] - 2
    real = _chart(page, "real")
    assert real["labels"][:2] == ["real cache", "real cache (hit eff.)"] and len(real["labels"]) >= 3
    assert real["values"] > 10
    hits = page.evaluate("() => window.cachescope.charts.real.data[2].filter(v => v !== null).length")
    assert hits > 5  # the real cache's hit efficiency, from its records' hit/miss/bypass bytes
    age = _chart(page, "age")  # how long data stays in each shadow of that size
    assert age["labels"] and all(x.endswith("(h)") for x in age["labels"]) and age["values"] > 10
    tiers = page.locator("#tier-table tbody tr")
    assert tiers.count() >= 3
    assert "hit-drop" in page.locator("#alerts-table").inner_text()
    assert page.locator("#eff-chart canvas").count() == 1
    page.screenshot(path=str(ARTIFACTS / "page.png"), full_page=True)


def test_selectors_change_the_series(page):
    page.select_option("#policy", ["lru", "arc"])
    page.wait_for_function("() => window.cachescope.charts.efficiency.series.length === 3", timeout=0)
    assert sorted(_chart(page, "efficiency")["labels"]) == ["arc 10 TB", "lru 10 TB"]
    page.select_option("#size", ["2000000000000", "10000000000000"])
    page.wait_for_function("() => window.cachescope.charts.efficiency.series.length === 5", timeout=0)
    labels = _chart(page, "efficiency")["labels"]
    assert sorted(labels) == ["arc 10 TB", "arc 2 TB", "lru 10 TB", "lru 2 TB"]
    tier = page.locator("#tier option").nth(1).get_attribute("value")
    page.select_option("#tier", tier)
    page.wait_for_function(f"() => window.cachescope.charts.efficiency.series.slice(1)"
                           f".every(s => s.label.endsWith(' · {tier}'))", timeout=0)
    page.screenshot(path=str(ARTIFACTS / "selectors.png"), full_page=True)


def test_whatif_form_shows_the_api_answer(page, server):
    page.select_option("#wi-policy", "belady")
    page.fill("#wi-size", "5TB")
    frm, to = page.input_value("#wi-from"), page.input_value("#wi-to")
    page.click("#wi-run")
    page.wait_for_selector("#whatif-table tr.answer", timeout=0)
    row = page.locator("#whatif-table tr.answer td").all_inner_texts()
    group = page.input_value("#group")
    want = _get(server + "/v1/whatif", {"policy": "belady", "size": "5TB", "from": frm, "to": to, "cache_group": group})
    assert row[0] == "what-if belady 5 TB"
    assert row[1] == str(want["requests"]) and row[2] == f"{want['hit_ratio']:.3f}"
    assert row[3] == str(want["delayed_hits"]) and row[4] == f"{want['byte_hit_ratio']:.3f}"
    live = page.locator("#whatif-table tr[data-kind=live]")
    assert live.count() == 6  # beside every live shadow of the group
    for i in range(6):  # over whole days, the live shadows saw exactly the reads the what-if replayed
        assert live.nth(i).locator("td").nth(1).inner_text() == str(want["requests"])
    page.screenshot(path=str(ARTIFACTS / "whatif.png"), full_page=True)


def test_delayed_hits_show_beside_hits(page, server):
    # the xcache shadow's fetches take the g-stream's attach..detach durations: reads that found its
    # blocks in flight are delayed hits, in the tier table beside the hits and as a metric of the chart
    group = page.input_value("#group")
    page.select_option("#policy", ["xcache"])
    page.wait_for_function("() => document.querySelector('#tier-caption').textContent.startsWith('xcache ')",
                           timeout=0)
    api = _get(server + f"/v1/efficiency?cache_group={group}&policy=xcache&size=10TB&by_tier=true&step=1d")
    want = {s["tier"]: sum(s["delayed_hits"]) for s in api["series"]}
    assert sum(want.values()) > 0
    head = page.locator("#tier-table thead th").all_inner_texts()
    assert head[3:6] == ["hit eff.", "delayed hits", "transfer eff."]
    rows = [r.locator("td").all_inner_texts() for r in page.locator("#tier-table tbody tr").all()]
    assert {r[0]: int(r[4]) for r in rows} == want
    page.select_option("#metric", "delayed_hit_ratio")
    page.wait_for_function("() => window.cachescope.charts.efficiency.axes[1].label === 'delayed hits / reads'",
                           timeout=0)
    hourly = _get(server + f"/v1/efficiency?cache_group={group}&policy=xcache&size=10TB&step=1h")["series"]
    ratios = [d / r for s in hourly for d, r in zip(s["delayed_hits"], s["requests"]) if r]
    drawn = page.evaluate("() => window.cachescope.charts.efficiency.data[1].filter(v => v !== null)")
    assert len(drawn) == len(ratios) and max(drawn) == pytest.approx(max(ratios), rel=1e-12) and max(drawn) > 0
    page.screenshot(path=str(ARTIFACTS / "delayed.png"), full_page=True)


def test_alerts_endpoint_answers_from_the_alerts_table(server):
    both = _get(server + "/v1/alerts")["alerts"]
    assert [a["state"] for a in both] == ["firing", "resolved"] and {a["rule"] for a in both} == {"hit-drop"}
    firing = _get(server + "/v1/alerts?state=firing")["alerts"]
    assert len(firing) == 1 and firing[0]["starts_at"] == both[1]["starts_at"]
    assert f"{firing[0]['value']:.3f}" in firing[0]["summary"]
    # a cache group the store does not know is no silent empty list: a 422 naming the field
    with pytest.raises(urllib.error.HTTPError) as e:
        _get(server + "/v1/alerts?state=resolved&cache_group=nowhere")
    assert e.value.code == 422 and json.loads(e.value.read())["field"] == "cache_group"


# ------------------------------------------------------------------------------------------ hostile names

#: names as a log or a site configuration may carry them; each would set window.__xss if it ran
HOSTILE = {
    "site": 'MWT2<img src=x onerror="window.__xss=\'site\'">',
    "server": 'xc"><script>window.__xss="server"</script>',
    "tier": "<svg onload=window.__xss='tier'></svg>",
    "summary": "'><img src=x onerror=window.__xss='summary'>",
}


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory):
    """A store whose site, server (so cache group), data tier and alert summary are HTML: the
    site and server in the g-stream records, the tier from a site tier rule, the summary from
    the site's alert rule."""
    tmp = tmp_path_factory.mktemp("hostile")
    w, _ = apply("hit-drop", make_workload(12_000, days=2, sites=1, servers=2, seed=13))
    files = write("xrootd-gstream", w, tmp / "logs", single_file=False)
    for f in files:
        text = f.read_text().replace(json.dumps(w.sites[0]), json.dumps(HOSTILE["site"]))
        f.write_text(text.replace('"xcache00.', json.dumps(HOSTILE["server"])[:-1] + "."))
    (tmp / "tiers.yaml").write_text(yaml.safe_dump({"version": 1, "vos": {"cms": {"rules": [
        {"name": "hostile", "regex": "^/store/", "tier": HOSTILE["tier"]}]}}}))
    yield from _serve(tmp, files, {
        "site": HOSTILE["site"], "cache_groups": {"mode": "server"}, "tiers": {"rules_files": ["tiers.yaml"]},
        "pipeline": {"shadow": {"policies": ["lru", "arc"], "sizes": ["2TB", "10TB"]}, "curve": {"points": 8}},
        "alerts": {"defaults": False, "rules": [_alert_rule(summary=HOSTILE["summary"])]}})


def test_names_from_the_data_are_text_never_markup(browser, hostile_server):
    # a site, server, tier or alert summary was written into the page as HTML and ran (issue 28)
    configs = _get(hostile_server + "/v1/configs")
    groups = [g["cache_group"] for g in configs["cache_groups"]]
    hostile_group = next(g for g in groups if HOSTILE["server"] in g)
    assert hostile_group.startswith(HOSTILE["site"] + "/")
    for pg in _open(browser, hostile_server):
        pg.select_option("#group", hostile_group)
        pg.wait_for_function("() => window.cachescope.loaded.efficiency && "
                             "document.querySelector('#alerts-table tbody td:nth-child(5)')", timeout=0)
        # the tier selector, the tier table, the chart legend and the alerts show the names as text
        pg.select_option("#tier", HOSTILE["tier"])
        pg.wait_for_function("t => window.cachescope.charts.efficiency.series.slice(1).length > 0 && "
                             "window.cachescope.charts.efficiency.series.slice(1).every(s => s.label.endsWith(t))",
                             arg=" · " + HOSTILE["tier"], timeout=0)
        ran = pg.evaluate("() => window.__xss === undefined ? null : String(window.__xss)")
        assert ran is None, f"the {ran} name ran as script"
        injected = pg.evaluate("""() => ({img: document.querySelectorAll('img').length,
                                          svg: document.querySelectorAll('td svg, option svg, .u-legend svg').length,
                                          scripts: document.querySelectorAll('script').length})""")
        assert injected == {"img": 0, "svg": 0, "scripts": 2}, injected
        page_text = pg.inner_text("body")
        assert HOSTILE["tier"] in pg.locator("#tier-table tbody").inner_text()
        assert HOSTILE["tier"] in pg.locator("#eff-chart").inner_text()  # the uPlot legend
        alerts = pg.locator("#alerts-table tbody").inner_text()
        assert HOSTILE["summary"] in alerts and hostile_group in alerts
        assert pg.locator("#group option").all_inner_texts() == groups
        assert HOSTILE["site"] in page_text
        pg.screenshot(path=str(ARTIFACTS / "hostile.png"), full_page=True)


def test_every_answer_carries_a_strict_csp_and_the_favicon_is_served(server):
    for path in ("/", "/app.js", "/v1/configs", "/nowhere", "/favicon.ico"):
        with urllib.request.urlopen(urllib.request.Request(server + path)) if path != "/nowhere" else \
                _error(server + path) as r:
            h = r.headers
            csp = h["Content-Security-Policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
            assert "default-src 'self'" in csp and "object-src 'none'" in csp
            assert h["X-Content-Type-Options"] == "nosniff" and h["X-Frame-Options"] == "DENY"
            assert h["Referrer-Policy"] == "no-referrer"
            if path == "/favicon.ico":
                assert r.status == 200 and r.read().startswith(b"<svg")


def _error(url: str):
    try:
        urllib.request.urlopen(url)
    except urllib.error.HTTPError as e:
        assert e.code == 404
        return e
    raise AssertionError(f"{url} answered")


# ------------------------------------------------------------------------------------ installed wheel

@pytest.fixture(scope="module")
def wheel_server(tmp_path_factory):
    """`pip wheel .` of this checkout installed into a fresh virtual environment and served from
    there, in a directory outside the checkout: the page must come with its chart library from the
    wheel alone. The dependencies are the dev environment's, seen through a path entry (the wheel
    itself is installed with --no-deps, so nothing is fetched); the checkout's editable install is
    not (its .pth file is not processed from such an entry)."""
    tmp = tmp_path_factory.mktemp("wheel")
    # the engine's build is the one scripts/setup made (the shared cargo target directory): a relink
    env = {**os.environ, "CARGO_TARGET_DIR": os.environ.get("CARGO_TARGET_DIR", str(
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cachescope" / "cargo-target"))}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(REPO)],
                           capture_output=True, text=True, env=env)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next((tmp / "dist").glob("cachescope-*.whl"))
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"api/static/vendor/uPlot.iife.min.js", "api/static/vendor/uPlot.min.css",
            "api/static/vendor/uPlot.LICENSE"} <= names, sorted(n for n in names if n.startswith("api/static"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    dev_site = next(p for p in map(Path, sys.path) if p.name == "site-packages" and (p / "fastapi").is_dir())
    (site / "dev_dependencies.pth").write_text(str(dev_site) + "\n")
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    run = tmp / "run"
    run.mkdir()
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import api, cachescope; print(api.__file__)"],
                           capture_output=True, text=True, cwd=run)
    assert where.returncode == 0 and where.stdout.startswith(str(site)), (where.stdout, where.stderr)
    w = make_workload(6_000, days=2, sites=1, servers=1, seed=5)
    files = write("xrootd-gstream", w, tmp / "logs", single_file=False)
    yield from _serve(tmp, files, {"site": w.sites[0], "pipeline": {"shadow": {"policies": ["lru", "arc"],
                                                                               "sizes": ["2TB", "10TB"]}}},
                      cli=str(venv / "bin" / "cachescope"), cwd=run)


def test_the_page_of_an_installed_wheel_loads_its_chart_library_and_draws(browser, wheel_server):
    with urllib.request.urlopen(wheel_server + "/vendor/uPlot.iife.min.js") as r:
        assert r.status == 200 and b"uPlot" in r.read()
    for pg in _open(browser, wheel_server):
        assert pg.evaluate("() => typeof window.uPlot") == "function"
        eff = _chart(pg, "efficiency")
        assert eff["points"] > 0 and eff["values"] > 0
