"""Which senders count: the allow-list of the collector (`--allow CIDR[,CIDR…]`, `collect.allow`).

UDP monitoring carries no credential: the sender's address is all there is to trust, so the
collector names the XRootD servers it takes monitoring from. Listening on loopback allows the
loopback range by default (127.0.0.0/8 and ::1); listening anywhere else without an allow-list
is refused (`resolve`). A datagram from any other address is counted (by address, the most
frequent kept) and dropped before it is decoded.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterable

from cachescope.errors import UsageError

LOOPBACK = ("127.0.0.0/8", "::1/128")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
#: addresses remembered (allowed or not) before the memo starts again: a flood of forged
#: addresses costs a bounded dict, not the heap
_MEMO = 4096
#: distinct refused addresses kept in the counts (the rest are summed under "other")
_REFUSED_KEPT = 100


def parse_allow(items: str | Iterable[str], where: str = "--allow") -> list[Network]:
    """CIDRs (or single addresses) from a comma-separated string or a list; UsageError naming the bad one."""
    if isinstance(items, str):
        items = items.split(",")
    out: list[Network] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise UsageError(f"{where} {item!r}: not an address or CIDR (e.g. 192.0.2.10, 192.0.2.0/24, "
                             "2001:db8::/32)") from None
    return out


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve(host: str, allow: str | Iterable[str] | None, *, where: str = "--allow",
            listen: str = "--listen") -> list[Network]:
    """The allow-list a collector listening on `host` uses: the given one, else loopback's when
    it listens on loopback; else UsageError (exit 2) saying how to name the servers."""
    nets = parse_allow(allow or [], where)
    if nets:
        return nets
    if is_loopback(host):
        return parse_allow(LOOPBACK)
    raise UsageError(f"{listen} on {host} would take monitoring from any host: name your XRootD servers with "
                     "--allow CIDR[,CIDR…] (or `collect: {allow: [CIDR, …]}` in the config, "
                     "CACHESCOPE_COLLECT__ALLOW='[\"CIDR\"]')")


class Senders:
    """`allowed(ip)`: whether a datagram from this address counts; refused ones are counted."""

    def __init__(self, networks: Iterable[Network] | None):
        #: None: every sender counts (library use; the command line always names them)
        self.networks = None if networks is None else list(networks)
        self._memo: dict[str, bool] = {}
        self.refused = 0
        self.refused_by: Counter[str] = Counter()

    def allowed(self, ip: str) -> bool:
        if self.networks is None:
            return True
        ok = self._memo.get(ip)
        if ok is None:
            ok = self._check(ip)
            if len(self._memo) >= _MEMO:
                self._memo.clear()
            self._memo[ip] = ok
        if not ok:
            self.refused += 1
            if ip in self.refused_by or len(self.refused_by) < _REFUSED_KEPT:
                self.refused_by[ip] += 1
            else:
                self.refused_by["other"] += 1
        return ok

    def _check(self, ip: str) -> bool:
        try:
            addr = ipaddress.ip_address(ip.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped  # a dual-stack socket states IPv4 senders so
        return any(addr in net for net in self.networks)
