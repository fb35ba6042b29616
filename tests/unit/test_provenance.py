"""A run records whether it had the machine to itself."""
from __future__ import annotations

import subprocess
import sys
import time

from benchlib.provenance import CpuShare

BURN = "import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass"


def test_cpu_used_by_our_own_children_is_ours_and_by_a_stranger_is_not():
    share = CpuShare()
    subprocess.run([sys.executable, "-c", BURN], check=True)  # our child: part of the run
    ours = share.stop()
    # others = machine busy time - ours, so counting the child as ours is what keeps it out
    # of "others"; no bound on "others" itself, which is whatever else the machine did
    assert ours["cpu_s_run"] >= 1.0

    share = CpuShare()
    # a process that is not our descendant (started by a shell that exits at once)
    subprocess.run(["sh", "-c", f"{sys.executable} -c '{BURN}' >/dev/null 2>&1 &"], check=True)
    time.sleep(2.0)
    theirs = share.stop()
    assert theirs["cpu_s_others"] >= 1.0 and theirs["others_share"] > 0.2
