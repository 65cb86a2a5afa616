"""Process-wide allocator setting for the processes that run the processing core.

Each batch makes and drops arrays of tens of MB (a batch's cells, its rows, their columns). glibc
serves any block above its mmap threshold (at most 32 MiB by default) with fresh pages, which the
kernel faults in and zeroes one by one, and returns them when the array is freed: the next batch
pays again. With the thresholds raised, freed blocks stay in the heap and are reused. The heap then
keeps its high-water mark until the process ends, which a replay or a job worker does anyway.
"""

from __future__ import annotations

import ctypes

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: blocks below this come from the heap (glibc's own ceiling for the setting is HEAP_MAX per
#: thread arena; the main thread's heap takes it whole)
MMAP_THRESHOLD = 1 << 30
#: free memory at the heap's top kept, not returned to the system (mallopt takes a C int)
TRIM_THRESHOLD = (1 << 31) - 1


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds; False where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this interpreter runs on
    except (OSError, AttributeError):  # musl and others: no mallopt, nothing to tune
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
