"""`make lab`: JupyterLab on the notebooks, on loopback, with the URL printed first.

A JupyterLab is a shell for whoever holds its token (its terminals, its kernels), and
`make lab` often runs as root. So the token is a fresh random one that only this
terminal sees. It goes to Jupyter in a 0600 file in a private 0700 directory
(JUPYTER_TOKEN_FILE), never on the command line, which `ps` shows to every account, and
not in the environment either: Jupyter's kernels inherit its environment, and whatever a
kernel starts as another account would carry the token where that account reads it
(/proc/<pid>/environ). The directory is removed by the next run's stale-directory sweep
once Jupyter (this process, after exec) is gone. The server listens on 127.0.0.1 only, on
a free port. Jupyter's own runtime files that repeat the token are written 0600 in the
invoking account's runtime directory. As root, Jupyter refuses to start without
--allow-root; we pass it.
"""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
from pathlib import Path

from benchlib import tempdirs
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


def token_file(token: str) -> Path:
    """A file only we can read, holding `token`, in a directory of its own."""
    path = tempdirs.make("lab") / "token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return path


def main() -> None:
    port, token = _free_port(), secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if k != "JUPYTER_TOKEN"} | {"JUPYTER_TOKEN_FILE": str(token_file(token))}
    print(f"JupyterLab: open http://127.0.0.1:{port}/lab?token={token}  (Ctrl-C stops it)", flush=True)
    cmd = command(port)
    os.execve(cmd[0], cmd, env)


if __name__ == "__main__":
    main()
