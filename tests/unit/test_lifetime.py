"""A child started with `dies_with_us` dies with a SIGKILLed harness, even when the harness
was started the way a shell starts a background job (SIGINT and SIGQUIT ignored, which
children inherit): the case where CI once found our S3 emulator still running."""
from __future__ import annotations

import subprocess
import sys
import time

import psutil

HARNESS = """
import signal, subprocess, sys, time
from benchlib.provision.lifetime import dies_with_us
kids = [subprocess.Popen(["sleep", "300"], preexec_fn=dies_with_us()),
        subprocess.Popen(["sleep", "300"], preexec_fn=dies_with_us(signal.SIGQUIT))]
print(*(k.pid for k in kids), flush=True)
time.sleep(300)
"""


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_children_die_with_a_sigkilled_harness(started_as):
    harness = subprocess.Popen([sys.executable, "-c", HARNESS], stdout=subprocess.PIPE, text=True,
                               preexec_fn=started_as)
    kids = [int(pid) for pid in harness.stdout.readline().split()]
    try:
        assert len(kids) == 2 and all(_running(pid) for pid in kids)
        harness.kill()
        harness.wait()
        deadline = time.monotonic() + 10
        while any(_running(pid) for pid in kids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in kids if _running(pid)] == [], "a child outlived its SIGKILLed harness"
    finally:
        harness.stdout.close()
        for pid in kids:
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                pass
