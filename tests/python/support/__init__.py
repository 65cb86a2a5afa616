"""Helpers shared by both test tiers (unit/ and integration/): the real servers' pytest fixtures
(services.py, loaded by conftest.py), the local clusters (clusters.py), synthetic streams and
mutated lines, the real XCache lab (xcache_*.py), the fixture files (data.py)."""
