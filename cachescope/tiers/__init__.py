"""Data tiers of grid files (ATLAS, CMS; extensible by a site YAML): see rules.yaml."""

from cachescope.tiers.classifier import (
    UNKNOWN,
    RulesError,
    TierClassifier,
    TierInfo,
    clean_path,
    load_rules,
    merge_rules,
    rucio_hash,
    rucio_path,
    shipped_rules,
)

__all__ = [
    "UNKNOWN",
    "RulesError",
    "TierClassifier",
    "TierInfo",
    "clean_path",
    "load_rules",
    "merge_rules",
    "rucio_hash",
    "rucio_path",
    "shipped_rules",
]
