"""The log format names, for help texts: listing them must not import every parser and the tier
rules (`cachescope --help` has a 0.15 s budget). tests/python/unit/cli/test_parse_cli.py checks this tuple
against the parsers' registry (ingest.formats.FORMATS), which stays the one that parses."""

FORMAT_NAMES = ("dcache-billing", "dcache-json", "xrootd-gstream", "xrootd-collector", "xcache-reporter",
                "eos-report", "rucio-trace", "http-access", "csv")
