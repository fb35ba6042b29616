"""`make lab`: JupyterLab on the notebooks, on loopback, with the URL printed first.

As root, Jupyter refuses to start without --allow-root; we pass it (the server only
listens on 127.0.0.1 and needs a token that only this terminal sees). The port is a
free one, the token a fresh random one, so the printed URL is the one that works.
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


def command(port: int, token: str) -> list[str]:
    jupyter = shutil.which("jupyter", path=os.path.dirname(sys.executable)) or "jupyter"
    cmd = [jupyter, "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={NOTEBOOK_DIR}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def main() -> None:
    port, token = _free_port(), secrets.token_urlsafe(24)
    print(f"JupyterLab: open http://127.0.0.1:{port}/lab?token={token}  (Ctrl-C stops it)", flush=True)
    cmd = command(port, token)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main()
