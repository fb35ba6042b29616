"""Every connection of a worker's psycopg pool taken by other code and kept: an application
whose requests hold the pool it shares with its queue's workers (the chaos study's
pool_exhaustion fault, through the contract's `hold_pool` and `release_pool`).

Why a request per connection, all at once: psycopg_pool serves waiting requests in order, so
once ours are queued every connection a worker gives back comes to us, and the workers' next
requests wait behind ours, as they would behind a busy application's. A connection the library
never gives back (a LISTEN session) stays its own; the reply says how many were held.
"""
from __future__ import annotations

import asyncio
from typing import Any

HOLD_LIMIT_S = 3600.0  # a queued request's own timeout: the harness's release (or the process's end) comes first


class PoolHold:
    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.held: list[Any] = []
        self.waiting: list[asyncio.Task] = []

    async def _take(self) -> None:
        conn = await self.pool.getconn(timeout=HOLD_LIMIT_S)
        self.held.append(conn)

    async def take(self, within_s: float) -> dict[str, int]:
        """Queue a request for every connection the pool may open; after `within_s`, say how many are held."""
        size = self.pool.max_size
        self.waiting = [asyncio.create_task(self._take()) for _ in range(size)]
        await asyncio.wait(self.waiting, timeout=within_s)
        return {"held": len(self.held), "pool_max": size}

    async def release(self) -> int:
        """Stop waiting, give every held connection back; how many were held by then."""
        for task in self.waiting:
            task.cancel()
        await asyncio.gather(*self.waiting, return_exceptions=True)
        held, self.held, self.waiting = self.held, [], []
        for conn in held:
            await self.pool.putconn(conn)
        return len(held)
