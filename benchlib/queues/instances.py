"""A worker system deployed as N processes over one install: the tuning study's `instances`.

Why: a worker library runs in production as several processes (a container or a core each). On
two cores a second process can use the core that one process cannot (Node runs one thread,
Python's libraries hold the GIL), whatever its worker count. `Instances(name, n, settings)` reads
like one worker system, so any study that drives a worker system through
workload.consumers.InProcess runs it unchanged, the capacity study's step among them:

- each instance is the system's process form (queues.instance.as_process: its adapter, or the
  generic Python wrapper), all started when the session opens, as a deployment's processes are
  up before it takes work;
- install and enqueue go through the first instance (the application's, as in a deployment);
- `work(C, ...)` runs C / n workers in each instance, so one instance against two compares the
  same in-flight concurrency over one or two processes, one thing changed (METHOD.md rule 13).

Only worker systems: their processes report each job by its seq (the payload's), so no instance
needs the ids another's enqueue returned. A pull design's consumers are the harness's own
connections already; more processes would only split the harness.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from benchlib import queues
from benchlib.errors import BenchError
from benchlib.queues.base import Handled
from benchlib.queues.instance import as_process
from benchlib.workload.job_work import NO_WORK, JobWork


def refusal(name: str, instances: int, concurrency: int | None = None) -> str | None:
    """Why `name` cannot run as `instances` processes (at `concurrency` in-flight jobs), or None."""
    if instances < 1:
        return f"instances must be at least 1, not {instances}"
    cls = queues.QUEUES.get(name)
    if cls is None or cls.kind != "worker":
        return f"instances: {name} is not a worker system (a pull design's consumers are the harness's connections)"
    if concurrency is not None and concurrency % instances:
        return f"concurrency {concurrency} cannot be split evenly over {instances} instances"
    return None


class Instances:
    """`instances` processes of worker system `name` at `settings` (keys it declares); everything
    else a study reads of a system (caps, tables, summary, ...) is its process form's."""

    kind = "worker"

    def __init__(self, name: str, instances: int, settings: dict[str, Any] | None = None) -> None:
        if (why := refusal(name, instances)) is not None:
            raise BenchError(why)
        if settings and (why := queues.settings_refusal(name, settings)) is not None:
            raise BenchError(why)
        self.name, self.instances = name, instances
        self.process = as_process(name)(dict(settings) if settings else None)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.process, attr)

    def per_instance(self, concurrency: int) -> int:
        if (why := refusal(self.name, self.instances, concurrency)) is not None:
            raise BenchError(why)
        return concurrency // self.instances

    def settings(self, concurrency: int, batch: int | None) -> dict[str, Any]:
        """Each instance's throughput-bounding settings, how many instances there are, and the ceiling
        they imply together (each instance's, n times)."""
        out = {**self.process.settings(self.per_instance(concurrency), batch), "instances": self.instances}
        if isinstance(ceiling := out.get("ceiling_jobs_per_s"), (int, float)):
            out["ceiling_jobs_per_s"] = ceiling * self.instances
        return out

    @asynccontextmanager
    async def session(self, target: Any) -> AsyncIterator[Sessions]:
        async with AsyncExitStack() as stack:
            opened = [await stack.enter_async_context(self.process.session(target)) for _ in range(self.instances)]
            yield Sessions(self, opened)


class Sessions:
    """The instances' sessions as one WorkerSession (queues/base.py)."""

    def __init__(self, system: Instances, sessions: list[Any]) -> None:
        self.system, self.sessions = system, sessions
        self.first = sessions[0]

    @property
    def ran_with(self) -> list[dict[str, Any]]:
        """Each instance's settings as its `work` reply gave them (what the library ran)."""
        return [dict(s.ran_with) for s in self.sessions]

    @property
    def pids(self) -> tuple[int, ...]:
        """Every instance's process (the capacity study adds their CPU to the client's)."""
        return tuple(s.proc.pid for s in self.sessions)

    async def install(self) -> None:
        await self.first.install()

    async def uninstall(self) -> None:
        await self.first.uninstall()

    async def enqueue_many(self, payloads: Any) -> list[Any]:
        return await self.first.enqueue_many(payloads)

    async def work(self, concurrency: int, batch: int | None, handled: Handled, stop: asyncio.Event,
                   continuous: bool = False, job_work: JobWork = NO_WORK) -> None:
        """C / n workers in every instance until `stop`; one instance's failure stops the others."""
        each = self.system.per_instance(concurrency)
        async with asyncio.TaskGroup() as group:
            for s in self.sessions:
                group.create_task(s.work(each, batch, handled, stop, continuous, job_work))


__all__ = ["Instances", "Sessions", "refusal"]
