"""The small protocol every system under test speaks.

Pull queues (this file) are driven by the harness itself, so each operation can be
timed: `install` (fresh state), `enqueue_many`, `dequeue(n)`, `ack(ids)`, and
`settle` (untimed housekeeping between prefill and the clock). Worker systems that
run their own loop (procrastinate, River, ...) will get a second, equally small
protocol beside this one; studies declare which kinds they support.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

Job = Sequence[Any]  # (id, payload, ...): only job[0], the unique id, is relied upon


class PullQueue(Protocol):
    name: ClassVar[str]
    backend: ClassVar[str]  # which provision.BACKENDS entry it runs on
    kind: ClassVar[str]  # "pull"
    summary: ClassVar[str]  # one line for the README and the report

    async def install(self, conn: Any) -> None:
        """Drop and recreate the design's tables: every sample starts empty."""

    async def uninstall(self, conn: Any) -> None:
        """Drop everything install created (a study cleans up a server that is not ours)."""

    async def enqueue_many(self, conn: Any, payloads: Sequence[str]) -> list[int]:
        """Insert jobs (JSON text payloads); return their ids."""

    async def settle(self, conn: Any) -> None:
        """Untimed housekeeping after a prefill (statistics, checkpoint)."""

    async def dequeue(self, conn: Any, n: int) -> Sequence[Job]:
        """Claim up to n ready jobs in one transaction; [] when none is ready."""

    async def ack(self, conn: Any, ids: Sequence[int]) -> None:
        """Mark claimed jobs done ("archive") in a transaction of its own."""
