"""Synthetic but realistic grid-storage workloads, written in the real log formats.

`make_workload(...)` (workload.py) draws the accesses (the ground truth, numpy columns);
`render(fmt, w)` (renderers/, one module per format) writes them as the lines that format's
producer would write; `write(...)` (writer.py) streams them to files. Deterministic for a seed.

The model, per VO (each site serves both, mostly one):
ATLAS  HITS     pileup library replicated at every site, re-read by pileup jobs (uniform draws)
       EVNT     small library read by simulation jobs
       AOD      large catalogue read rarely (about 1.3 reads per file), 2-6 GB, many above 4 GiB
       DAOD_PHYS / DAOD_PHYSLITE  datasets born during the period (written), hot when new and
                fading over days (popularity shifts), some deleted; 60% of reads partial
       USER     user outputs written in bursts, read a few times within hours, often deleted
       log      job log tarballs, written, rarely read
       RAW      a few large reads
CMS    MINIAODSIM / MINIAOD, NANOAODSIM / NANOAOD datasets with shifting popularity, partial
       MINIAOD reads; AODSIM rare and large; PREMIX pileup library (Neutrino_E-10_gun, 4-10 GB)
       read in random 5-15% chunks; /store/user bursts as for ATLAS.
XCache observations (xrootd-gstream, xcache-reporter): an LRU cache per (site, cache server)
holding 20% of its working set, caching the bytes actually read per file, 1% bypass.
ATLAS/CMS site, path and server names are in names.py.
"""

from ingest.generate.model import DAY_US, GIB, HOUR_US, MIB, OP_DELETE, OP_READ, OP_WRITE, Catalogue, Workload
from ingest.generate.renderers import CSV_HEADER, PER_SITE, RENDERERS, Line, render
from ingest.generate.workload import make_workload
from ingest.generate.writer import write

__all__ = ["Workload", "Catalogue", "make_workload", "render", "write", "RENDERERS", "PER_SITE", "CSV_HEADER", "Line",
           "OP_READ", "OP_WRITE", "OP_DELETE", "DAY_US", "HOUR_US", "GIB", "MIB"]
