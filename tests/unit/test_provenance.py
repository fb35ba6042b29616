"""A run records whether it had the machine to itself."""
from __future__ import annotations

import subprocess
import sys
import time

from benchlib.provenance import CpuShare

# 1.5 s of CPU time, however long a busy machine takes to grant it (not 1.5 s of wall time)
BURN = "import time\nwhile time.process_time() < 1.5: pass"


def test_cpu_used_by_our_own_children_is_ours_and_by_a_stranger_is_not(tmp_path):
    share = CpuShare()
    subprocess.run([sys.executable, "-c", BURN], check=True)  # our child: part of the run
    ours = share.stop()
    # others = machine busy time - ours, so counting the child as ours is what keeps it out
    # of "others"; no bound on "others" itself, which is whatever else the machine did
    assert ours["cpu_s_run"] >= 1.0

    share = CpuShare()
    # a process that is not our descendant (started by a shell that exits at once); it
    # leaves a file when it has burnt its CPU time
    done = tmp_path / "done"
    stranger = f"{BURN}\nopen({str(done)!r}, 'w').close()"
    subprocess.run(["sh", "-c", f"{sys.executable} -c \"{stranger}\" >/dev/null 2>&1 &"], check=True)
    deadline = time.monotonic() + 60
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    theirs = share.stop()
    assert done.exists()
    assert theirs["cpu_s_others"] >= 1.0 and theirs["others_share"] > 0
