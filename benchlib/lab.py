"""`make lab`: JupyterLab on the notebooks, on loopback, with the URL printed first.

A JupyterLab is a shell for whoever holds its token (its terminals, its kernels), and
`make lab` often runs as root. So the token is a fresh random one that only this
terminal sees: it goes to Jupyter in its environment (JUPYTER_TOKEN, which only the
same account can read in /proc), never on the command line, which `ps` shows to every
account; the server listens on 127.0.0.1 only, on a free port. Jupyter's own runtime
files that repeat the token are written 0600 in the invoking account's runtime
directory. As root, Jupyter refuses to start without --allow-root; we pass it.
"""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys

from benchlib.notebooks import NOTEBOOK_DIR


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(port: int) -> list[str]:
    """Jupyter's command line: public (ps), so it holds no secret."""
    jupyter = shutil.which("jupyter", path=os.path.dirname(sys.executable)) or "jupyter"
    cmd = [jupyter, "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", f"--ServerApp.root_dir={NOTEBOOK_DIR}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def main() -> None:
    port, token = _free_port(), secrets.token_urlsafe(24)
    print(f"JupyterLab: open http://127.0.0.1:{port}/lab?token={token}  (Ctrl-C stops it)", flush=True)
    cmd = command(port)
    os.execve(cmd[0], cmd, {**os.environ, "JUPYTER_TOKEN": token})


if __name__ == "__main__":
    main()
