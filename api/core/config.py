"""Settings of `cachescope serve`: the `api` section of the settings tree (cachescope.config;
the fields are in cachescope/config/services.py) with what checks and reads them here.

Every field comes from the environment as CACHESCOPE_API__<NAME> (e.g. CACHESCOPE_API__TOKENS), or
by its flat name of before (CACHESCOPE_API_TOKENS); `cachescope serve` fills the store fields from
its options.
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Any

from pydantic import model_validator

from cachescope.config.services import ApiConfig
from cachescope.errors import UsageError

#: `metrics`: GET /metrics only (a Prometheus scraper); `read` may scrape it too
SCOPES = ("read", "whatif", "metrics")
#: the fields' names before they were the tree's `api` section (Settings(api_tokens=…) still works)
_RENAMED = {"api_tokens": "tokens", "api_tokens_file": "tokens_file"}


class SettingsError(UsageError, ValueError):
    """A setting that cannot work; the message names it."""


class Settings(ApiConfig):
    """The `api` section of the settings tree as `cachescope serve` runs it: the environment
    (CACHESCOPE_API__TOKENS, or the flat CACHESCOPE_API_TOKENS of before), then the values given
    here (`serve`'s options)."""

    @model_validator(mode="before")
    @classmethod
    def _environment_first(cls, data: Any) -> Any:
        from cachescope.config.environment import section_environment

        given = {_RENAMED.get(k, k): v for k, v in (data or {}).items()} if isinstance(data, dict) else data
        return {**section_environment("api"), **given} if isinstance(given, dict) else given

    def token_scopes(self) -> dict[bytes, frozenset[str]]:
        """sha256 digest → scopes, from tokens and tokens_file."""
        text = self.tokens
        if self.tokens_file is not None:
            try:
                text += "\n" + self.tokens_file.read_text()
            except OSError as e:
                raise SettingsError(f"tokens file {self.tokens_file}: {e.strerror}") from None
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
        if not self.token_scopes():
            if self.clickhouse_url is not None:
                raise SettingsError("serving a ClickHouse server needs API tokens: set CACHESCOPE_API_TOKENS "
                                    "(SHA256HEX:read+whatif) or CACHESCOPE_API_TOKENS_FILE")
            if not is_loopback(self.host):
                raise SettingsError(f"--host {self.host} is not loopback: set CACHESCOPE_API_TOKENS "
                                    "(SHA256HEX:read+whatif) or CACHESCOPE_API_TOKENS_FILE to serve on it")

    @property
    def open_access(self) -> bool:
        return not self.token_scopes()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
