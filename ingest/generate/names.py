"""ATLAS/CMS names: sites and their domains, storage paths per layout, servers, ids."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ingest.generate.model import Workload

ATLAS_SITES = ["MWT2", "AGLT2", "BNL-ATLAS", "SWT2_CPB", "DESY-HH", "LRZ-LMU", "UKI-SOUTHGRID-OX-HEP", "TOKYO-LCG2"]
CMS_SITES = ["T2_US_Nebraska", "T2_CH_CERN", "T1_US_FNAL", "T2_DE_DESY", "T2_IT_Pisa", "T2_UK_London_IC"]
SITE_DOMAINS = {
    "MWT2": "mwt2.org", "AGLT2": "aglt2.org", "BNL-ATLAS": "usatlas.bnl.gov", "SWT2_CPB": "uta.edu",
    "DESY-HH": "desy.de", "LRZ-LMU": "lrz.de", "UKI-SOUTHGRID-OX-HEP": "physics.ox.ac.uk",
    "TOKYO-LCG2": "icepp.jp", "T2_US_Nebraska": "unl.edu", "T2_CH_CERN": "cern.ch", "T1_US_FNAL": "fnal.gov",
    "T2_DE_DESY": "desy.de", "T2_IT_Pisa": "pi.infn.it", "T2_UK_London_IC": "ic.ac.uk",
}


def uuid_like(rng: np.random.Generator, n: int) -> list[str]:
    words = rng.integers(0, 2**32, size=(n, 5), dtype=np.uint64)
    return [
        f"{a:08X}-{b & 0xFFFF:04X}-{c & 0xFFFF:04X}-{d & 0xFFFF:04X}-{e:08X}{(a ^ e) & 0xFFFF:04X}"
        for a, b, c, d, e in words.tolist()
    ]


def names_of_sites(n: int) -> list[str]:
    out = []
    for i in range(n):
        pool = ATLAS_SITES if i % 2 == 0 else CMS_SITES
        name = pool[(i // 2) % len(pool)]
        if i // 2 >= len(pool):
            name = f"{name}-{i // 2 // len(pool) + 1}"
        out.append(name)
    return out


def domain(site: str) -> str:
    return SITE_DOMAINS.get(site.split("-")[0] if site not in SITE_DOMAINS else site, "example.org")


class Paths:
    """Storage paths of a file per site and storage layout, built once per (file, site)."""

    def __init__(self, w: Workload, style: str):
        self.w = w
        self.style = style
        self.cache: dict[tuple[int, int], str] = {}
        self.domains = [domain(s) for s in w.sites]

    def __call__(self, f: int, s: int) -> str:
        key = (f, s)
        path = self.cache.get(key)
        if path is None:
            path = self.cache[key] = storage_path(self.w, f, self.domains[s], self.style)
        return path


# Where each storage style keeps a VO's namespace: (ATLAS, before the path below /atlas/rucio/;
# CMS, before the logical path); None = the logical path as it is.
_ROOTS = {
    "dcache": ("/pnfs/{dom}/{token}/rucio/", "/pnfs/{dom}/data/cms"),
    "eos": ("/eos/atlas/{token}/rucio/", "/eos/cms"),
    "dpm": ("/dpm/{dom}/home/atlas/{token}/rucio/", "/dpm/{dom}/home/cms"),
    "xcache": ("atlas/rucio/", None),
}


def storage_path(w: Workload, f: int, dom: str, style: str) -> str:
    cat = w.catalogue
    p = cat.path[f]
    atlas = cat.vo[f] == 0
    root = _ROOTS.get(style, (None, None))[0 if atlas else 1]
    if root is None:
        return p
    if not atlas:
        return root.format(dom=dom) + p
    rest = p[len("/atlas/rucio/"):]
    token = "atlasscratchdisk" if rest.startswith("user/") else "atlasdatadisk"
    return root.format(dom=dom, token=token) + rest


def pnfs_id(f: int) -> str:
    return f"0000{(f * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF:016X}{f:016X}"


def server_names(w: Workload, style: str) -> list[list[str]]:
    out = []
    for s in w.sites:
        dom = domain(s)
        if style == "dcache":
            out.append([f"{s.lower().replace('_', '-')}-pool{j:02d}" for j in range(w.n_servers)])
        elif style == "xcache":
            out.append([f"xcache{j:02d}.{dom}" for j in range(w.n_servers)])
        else:
            out.append([f"fs{j:02d}.{dom}" for j in range(w.n_servers)])
    return out

