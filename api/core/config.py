"""Settings of `cachescope serve` (pydantic-settings): the store, tokens, limits, CORS, timeouts.

Every field can come from the environment as CACHESCOPE_<NAME> (e.g. CACHESCOPE_API_TOKENS);
`cachescope serve` fills the store fields from its options.
"""

from __future__ import annotations

import hashlib
import ipaddress
from pathlib import Path
from typing import Optional

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

#: `metrics`: GET /metrics only (a Prometheus scraper); `read` may scrape it too
SCOPES = ("read", "whatif", "metrics")


class SettingsError(ValueError):
    """A setting that cannot work; the message names it."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CACHESCOPE_", extra="ignore")

    store_dir: Optional[Path] = None
    clickhouse_url: Optional[str] = None
    database: str = "cachescope"
    host: str = "127.0.0.1"
    #: API tokens, hashed: entries `SHA256HEX:SCOPES` (SCOPES `read`, `whatif`, `metrics` joined by `+`),
    #: separated by commas or new lines. The hash is sha256 of the token as sent.
    api_tokens: str = ""
    #: a file of such entries, one a line (# comments allowed)
    api_tokens_file: Optional[Path] = None
    #: origins allowed by CORS; empty = CORS off
    cors_origins: list[str] = []
    #: what-if bounds: range (warm-up included), stored accesses, requests at once, (policy, size) pairs.
    #: Memory does not grow with the range (the accesses stream by chunks; belady keeps its range's,
    #: bounded by whatif_max_accesses): the days bound the time a replay holds a core. 200 days: a
    #: half year (184) with two weeks of warm-up
    whatif_max_days: float = Field(200.0, gt=0)
    whatif_max_accesses: int = Field(300_000_000, gt=0)
    whatif_concurrency: int = Field(2, ge=1)
    whatif_max_configs: int = Field(64, ge=1)
    #: request bodies above this are refused (413)
    max_body_bytes: int = Field(65_536, ge=1024)
    #: read answers (efficiency, curves, configs, compare) are kept this long, single-flight;
    #: 0 turns the cache off
    answer_cache_seconds: float = Field(15.0, ge=0)
    #: GET /v1/efficiency at hour and day steps answers from an in-process copy of those tables
    #: (api/series_index.py) while a table holds at most this many rows; 0 turns the copy off
    series_copy_max_rows: int = Field(1_000_000, ge=0)
    #: how often (seconds) the copy looks whether its table changed (an insert, merge or mutation)
    series_copy_check_seconds: float = Field(1.0, ge=0)
    #: server connections kept for concurrent reads (ClickHouse server only; chDB has one session)
    store_connections: int = Field(4, ge=1, le=64)
    #: slow clients (api/connections.py): a request header must be whole this long after its first
    #: byte (a new connection's first header, after it opens), else 408 and close
    header_timeout_seconds: float = Field(10.0, gt=0)
    #: a request body that stalls this long between two reads closes the connection
    body_timeout_seconds: float = Field(30.0, gt=0)
    #: an idle kept-alive connection is closed after this long
    keep_alive_seconds: float = Field(5.0, gt=0)
    #: connections open at once; one more gets a 503 and is closed before anything is read
    max_connections: int = Field(256, ge=1)
    #: a request header above this many bytes is refused (400)
    max_header_bytes: int = Field(16_384, ge=1024, le=1_048_576)

    def tokens(self) -> dict[bytes, frozenset[str]]:
        """sha256 digest → scopes, from api_tokens and api_tokens_file."""
        text = self.api_tokens
        if self.api_tokens_file is not None:
            try:
                text += "\n" + self.api_tokens_file.read_text()
            except OSError as e:
                raise SettingsError(f"tokens file {self.api_tokens_file}: {e.strerror}") from None
        out: dict[bytes, frozenset[str]] = {}
        for raw in text.replace(",", "\n").splitlines():
            entry = raw.split("#", 1)[0].strip()
            if not entry:
                continue
            digest, _, scopes = entry.partition(":")
            try:
                d = bytes.fromhex(digest.strip().removeprefix("sha256="))
            except ValueError:
                d = b""
            if len(d) != 32:
                raise SettingsError(f"token entry {entry[:12]}…: expected SHA256HEX:SCOPES (64 hex digits, the sha256 "
                                    "of the token; e.g. `printf %s \"$TOKEN\" | sha256sum`)")
            names = frozenset(s.strip() for s in (scopes or "read").split("+") if s.strip())
            bad = sorted(names - set(SCOPES))
            if bad:
                raise SettingsError(f"token entry {digest[:12]}…: unknown scope {', '.join(bad)} (scopes: {', '.join(SCOPES)})")
            out[d] = names
        return out

    def check(self) -> None:
        """Refuse settings that cannot run safely: exactly one store; tokens off loopback or
        over a server."""
        if (self.store_dir is None) == (self.clickhouse_url is None):
            raise SettingsError("give exactly one of --store DIR or --clickhouse URL")
        if not self.tokens():
            if self.clickhouse_url is not None:
                raise SettingsError("serving a ClickHouse server needs API tokens: set CACHESCOPE_API_TOKENS "
                                    "(SHA256HEX:read+whatif) or CACHESCOPE_API_TOKENS_FILE")
            if not is_loopback(self.host):
                raise SettingsError(f"--host {self.host} is not loopback: set CACHESCOPE_API_TOKENS "
                                    "(SHA256HEX:read+whatif) or CACHESCOPE_API_TOKENS_FILE to serve on it")

    @property
    def open_access(self) -> bool:
        return not self.tokens()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
