"""`make setup`'s adapter step: build every adapter in another language whose toolchain is here.

    python -m benchlib.adapters

The builds themselves, their manifests and their cache are queues/adapter_builds.py's.
"""
from __future__ import annotations

from benchlib.queues.adapter_builds import main

if __name__ == "__main__":
    raise SystemExit(main())
