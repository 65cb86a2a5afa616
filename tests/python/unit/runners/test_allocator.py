"""runners.allocator: a replay's big temporaries reuse freed heap memory instead of fresh pages."""

from __future__ import annotations

import subprocess
import sys

_PROGRAM = """
import resource, sys
import numpy as np
np._core.multiarray._set_madvise_hugepage(False)  # count 4 KiB pages (huge pages fault 2 MiB at once)
if sys.argv[1] == "tuned":
    from runners.allocator import keep_freed_memory
    assert keep_freed_memory()
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = np.ones(64 << 20, dtype=np.uint8)  # a batch-sized temporary, above glibc's default threshold
    del a
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(sum(faults[1:]))
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _PROGRAM, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_a_freed_block_is_reused_without_faulting_its_pages_in_again():
    pages = (64 << 20) // 4096
    assert _faults("default") > pages  # each 64 MiB array: fresh pages, faulted in and zeroed
    assert _faults("tuned") < pages // 10  # the same block again, from the heap
