"""nbval's kernels talk over unix sockets (ipc), not TCP ports.

Why: `make test` runs nbval on four pytest-xdist workers, so kernels start at once. Over TCP,
jupyter_client picks a kernel's five ports by binding port 0 and closing it, and the kernel
binds them later: a port another worker's kernel or server takes meanwhile kills the kernel
before it replies to kernel_info (CI, 2026-12-06: all 9 cells of pressure.ipynb, passed on a
rerun). A unix socket is named after the kernel's own connection file, a path no other process
picks. nbval builds its KernelManager without a config, so its module's name is rebound here.
"""
from __future__ import annotations

import os
import tempfile
import uuid

import nbval.kernel
from jupyter_client.manager import KernelManager
from jupyter_core.paths import jupyter_runtime_dir
from traitlets import CaselessStrEnum, default


class IpcKernelManager(KernelManager):
    """A kernel on unix sockets next to its connection file, in the user's runtime directory (0700)."""

    transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc", config=True)

    @default("connection_file")
    def _connection_file_default(self) -> str:
        name = f"nbval-{uuid.uuid4().hex[:12]}.json"  # its sockets: nbval-<id>-ipc-<n> beside it
        runtime = jupyter_runtime_dir()
        try:
            os.makedirs(runtime, mode=0o700, exist_ok=True)
        except OSError:  # a home the account cannot write: a private directory of its own instead
            runtime = ""
        if not runtime or len(os.path.join(runtime, name)) > 90:  # a unix socket's path has 107 bytes
            runtime = tempfile.mkdtemp(prefix="nbval-")  # 0700, and left empty after the kernel
        return os.path.join(runtime, name)


nbval.kernel.KernelManager = IpcKernelManager
