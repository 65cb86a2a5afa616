"""One vocabulary: what a person reads says "hit efficiency" and "transfer efficiency" (the field's
words, DESIGN.md); "hit ratio", "byte hit ratio", "HR" and "BHR" stay out of the CLI's help and
tables, the page, the report's labels, the dashboards, the README and the docs/ pages it links. JSON field names
(`hit_ratio`, `byte_hit_ratio`: the contracts) are identifiers, not words a person reads, and are
not matched."""

from __future__ import annotations

import io
import json
import re
import tokenize
from pathlib import Path

import pytest
import typer
from typer._click.core import Context  # typer 0.28 vendors click

REPO = Path(__file__).resolve().parents[3]

#: the old words: spaced or hyphenated (an identifier's underscore is not matched), and HR/BHR as words
OLD = re.compile(r"\b(byte[ -])?hit[ -]ratios?\b|\bB?HR\b", re.IGNORECASE)
_UPPER_ONLY = re.compile(r"\bB?HR\b")


def _old_words(text: str) -> list[str]:
    found = []
    for m in OLD.finditer(text):
        word = m.group(0)
        if word.lower() in ("hr", "bhr") and not _UPPER_ONLY.fullmatch(word):
            continue  # "hr" in lower case is an hour (`1hr`) or a variable, not the label
        found.append(word)
    return found


def _strings(path: Path) -> str:
    """The string literals of a Python file: its texts (help, table headers, labels, titles)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.STRING:
            out.append(tok.string)
    return "\n".join(out)


def _help_texts() -> dict[str, str]:
    import cli

    # every command module registered (`from cli import app` can meet the module cli.app instead)
    root = typer.main.get_command(cli._load(sorted(set(cli.COMMANDS.values()))))
    texts = {}

    def walk(cmd, ctx: Context, name: str) -> None:
        texts[name] = cmd.get_help(ctx)
        if hasattr(cmd, "list_commands"):  # a group
            for sub_name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, sub_name)
                walk(sub, Context(sub, info_name=sub_name, parent=ctx), f"{name} {sub_name}")

    walk(root, Context(root, info_name="cachescope"), "cachescope")
    return texts


def _dashboard_texts(doc) -> list[str]:
    """Every string a person reads in a Grafana file: titles, descriptions, labels, legends,
    overrides, links (the queries' SQL too: its aliases become column headers)."""
    out = []

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str):
            out.append(v)

    walk(doc)
    return out


def test_the_old_words_are_recognised():
    # the check itself: it must find each old word, and leave the contract's identifiers alone
    for text in ('"hit ratio"', "byte hit ratio", "Byte-hit-ratio", "hit ratios", "(HR)", "BHR:"):
        assert _old_words(text), text
    for text in ("hit_ratio", "byte_hit_ratio", "hit efficiency", "miss-ratio curve", "1hr", "CHROME", "throughput"):
        assert not _old_words(text), text


def test_cli_help_speaks_of_hit_and_transfer_efficiency():
    texts = _help_texts()
    assert {"cachescope", "cachescope simulate", "cachescope whatif", "cachescope bench engine"} <= set(texts)
    bad = {name: _old_words(text) for name, text in texts.items() if _old_words(text)}
    assert not bad, bad
    assert "hit and transfer efficiency" in texts["cachescope"]


@pytest.mark.parametrize("path", sorted(p.relative_to(REPO).as_posix() for p in (REPO / "cli").glob("*.py")))
def test_cli_tables_and_messages_use_the_field_words(path):
    assert not _old_words(_strings(REPO / path)), path


def test_cli_tables_name_the_columns_in_the_field_words():
    # the tables of simulate, replay and whatif head their columns so (what an operator reads)
    for name in ("simulate.py", "replay.py", "whatif.py"):
        text = _strings(REPO / "cli" / name)
        assert '"hit efficiency"' in text and '"transfer efficiency"' in text, name


@pytest.mark.parametrize("name", ["index.html", "app.js"])
def test_the_page_labels_use_the_field_words(name):
    text = (REPO / "api" / "static" / name).read_text()
    assert not _old_words(text), name
    assert "transfer efficiency" in text


def test_report_labels_use_the_field_words():
    text = _strings(REPO / "cachescope" / "report.py")
    assert not _old_words(text)
    assert "hit efficiency" in text and "transfer efficiency" in text


def test_api_descriptions_use_the_field_words():
    # route docstrings and model descriptions are the OpenAPI page a person reads
    for path in sorted((REPO / "api").rglob("*.py")):
        assert not _old_words(path.read_text()), path


def test_dashboards_use_the_field_words():
    files = sorted((REPO / "dashboards").rglob("*.json")) + sorted((REPO / "dashboards").rglob("*.y*ml"))
    assert len(files) >= 6
    for f in files:
        texts = _dashboard_texts(json.loads(f.read_text())) if f.suffix == ".json" else [f.read_text()]
        bad = [w for t in texts for w in _old_words(t)]
        assert not bad, (f, bad)
    assert not _old_words(_strings(REPO / "dashboards" / "generate.py"))


#: what a newcomer reads: the README and the pages it links (docs/notes/ is history, not matched)
READ = ["README.md", "docs/operators.md", "docs/api.md", "docs/cli.md", "docs/settings.md", "docs/definitions.md"]


@pytest.mark.parametrize("name", READ)
def test_readme_and_its_pages_use_the_field_words(name):
    assert not _old_words((REPO / name).read_text()), name


def test_the_definitions_name_the_contract_fields():
    # the JSON contracts keep their names: the definitions say which word each one is
    text = (REPO / "docs" / "definitions.md").read_text()
    assert "`hit_ratio` is the hit\n  efficiency and `byte_hit_ratio` the transfer efficiency" in text
    assert "[docs/definitions.md](docs/definitions.md)" in (REPO / "README.md").read_text()
