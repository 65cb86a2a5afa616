"""Regenerate the derived documents kept in the repository: docs/settings.md's settings table and the
AccessEvent JSON Schema (both checked by tests). Run after a merge that touched either source."""

import re
import subprocess
import sys
from pathlib import Path

from cachescope.config.environment import settings_table

ROOT = Path(__file__).resolve().parents[2]
readme = ROOT / "docs" / "settings.md"
text = readme.read_text()
pattern = re.compile(r"(<!-- settings table:[^\n]*-->\n)(.*?)(\n<!-- end of settings table -->)", re.S)
if not pattern.search(text):
    sys.exit("docs/settings.md has no settings table block")
readme.write_text(pattern.sub(lambda m: m.group(1) + settings_table() + m.group(3), text))
subprocess.run([sys.executable, "-m", "cachescope.events", "--write"], check=True, cwd=ROOT)
