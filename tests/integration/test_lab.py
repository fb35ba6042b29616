"""`make lab` is a root shell for whoever holds its token: nobody else may hold it.

Started as the README says (python -m benchlib.lab), then probed as another account
(`nobody`): the token is not on any command line, not in any file that account can
read, and the server turns it away; it listens on loopback only; the token printed to
our terminal works."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from benchlib import tempdirs
from benchlib.outputs import REPO_ROOT

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another OS user")]

NOBODY_GET = """
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).status)
except urllib.error.HTTPError as err:
    print(err.code)
"""


def _as_nobody(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "nobody", "--", *cmd], capture_output=True, text=True, timeout=60)


def test_nobody_else_gets_the_token_or_in(tmp_path):
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    proc = subprocess.Popen([sys.executable, "-m", "benchlib.lab"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True)
    try:
        line = proc.stdout.readline()
        port, token = re.search(r"http://127\.0\.0\.1:(\d+)/lab\?token=(\S+)", line).groups()
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:  # up once it answers; a wrong token gets 403
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and proc.poll() is None, "JupyterLab did not start"
                time.sleep(0.5)
        python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
        # every command line, as another account sees them
        seen = _as_nobody("ps", "-eww", "-o", "args").stdout
        assert "jupyter" in seen and token not in seen
        # the server's environment is ours alone, and holds no token for a kernel to pass on: a
        # kernel's children may run as another account (the database server), which reads its own
        # processes' environments
        assert _as_nobody("cat", f"/proc/{proc.pid}/environ").returncode != 0
        request = urllib.request.Request(f"{base}/api/kernels?token={token}", data=b"{}", method="POST")
        kernel_id = json.load(urllib.request.urlopen(request, timeout=60))["id"]
        try:
            kernels = [p for p in psutil.Process(proc.pid).children(recursive=True) if kernel_id in " ".join(p.cmdline())]
            assert kernels, "no kernel process found"
            for p in [psutil.Process(proc.pid), *kernels]:
                environ = Path(f"/proc/{p.pid}/environ").read_bytes()
                assert token.encode() not in environ and b"JUPYTER_TOKEN=" not in environ, p.cmdline()
        finally:
            urllib.request.urlopen(urllib.request.Request(f"{base}/api/kernels/{kernel_id}?token={token}",
                                                          method="DELETE"), timeout=60)
        # no file that account can read holds it: temp dirs, the checkout, Jupyter's runtime files
        places = ["/tmp", "/var/tmp", "/dev/shm", str(REPO_ROOT), str(tmp_path)]
        found = _as_nobody("grep", "-rlsF", token, *places).stdout
        assert found == "", f"the token is readable by nobody in {found}"
        # and without it, no way in: not the terminals (a root shell), not the files
        for path in ("/api/terminals", "/api/contents", "/api/kernels"):
            assert _as_nobody(python, "-c", NOBODY_GET, base + path).stdout.strip() == "403", path
        # loopback only
        listening = {c.laddr.ip for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(True)]
                     for c in p.net_connections("inet") if c.status == psutil.CONN_LISTEN and c.laddr.port == int(port)}
        assert listening == {"127.0.0.1"}
        # while the URL printed to our own terminal works
        assert urllib.request.urlopen(f"{base}/api/terminals?token={token}", timeout=10).status == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
    # the token's directory goes with the next run's sweep, once Jupyter is gone
    tempdirs.sweep_stale()
    assert not [d for d in Path(tempfile.gettempdir()).glob("benchlib-lab-*") if tempdirs.owner(d) == proc.pid]
