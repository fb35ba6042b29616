"""What each job's handler does before it reports the job handled: the job-work axis.

Why: with no work (the default), a rate measures the queue alone, and in-flight concurrency
buys little. A job that waits 1 ms, as the jobs of the published cross-system run do, makes
concurrency the lever: W workers cap near W x 1,000 jobs/s. A job that spins 1 ms of CPU
shows what a handler's own cost does to a system whose workers share its thread.

- `wait`: an I/O-like pause; the event loop or runtime serves other jobs meanwhile. The jobs a
  handler is given together (a fetched batch) wait at the same time, each its own `ms`, as a
  handler awaiting one call per job would.
- `cpu`: a busy loop of `ms` on the handler's thread, per job; in one thread jobs take turns,
  so a batch of B spins B x `ms`.

Every handler does the work before it reports the job, so a job's handled time (and its
latency) includes its work. The `work` request of the JSON-lines contract carries
`request()`; `none` sends nothing, and its handlers run no code they did not run before.
"""
from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any

KINDS = ("none", "wait", "cpu")
MAX_MS = 1000.0  # a job's work is a pause in a rate study, never a run of its own
_TEXT = re.compile(r"^(wait|cpu) (\d+(?:\.\d+)?) ms$")


@dataclass(frozen=True)
class JobWork:
    kind: str = "none"
    ms: float = 0.0

    def __post_init__(self) -> None:
        if (refusal := _refusal(self.kind, self.ms)) is not None:
            raise ValueError(refusal)

    @classmethod
    def parse(cls, text: Any) -> JobWork:
        """'none', 'wait 1 ms' or 'cpu 1 ms' (a profile's words); ValueError says what to write."""
        if text == "none":
            return cls()
        found = _TEXT.match(text) if isinstance(text, str) else None
        if found is None:
            raise ValueError(f"job work {text!r}: write 'none', 'wait N ms' or 'cpu N ms'")
        return cls(found[1], float(found[2]))

    @classmethod
    def from_request(cls, given: Any) -> JobWork:
        """The `job_work` of a `work` request (absent: none); ValueError names what is wrong."""
        if given is None:
            return cls()
        if not isinstance(given, dict) or set(given) != {"kind", "ms"}:
            raise ValueError(f"job_work {given!r}: give {{\"kind\": \"wait\" or \"cpu\", \"ms\": N}}")
        return cls(given["kind"], given["ms"])

    def __bool__(self) -> bool:
        return self.kind != "none"

    def __str__(self) -> str:
        return "none" if not self else f"{self.kind} {self.ms:g} ms"

    def request(self) -> dict[str, Any] | None:
        """What a `work` request carries (None: nothing, the handlers of today)."""
        return {"kind": self.kind, "ms": self.ms} if self else None

    def settings(self) -> dict[str, float]:
        """The work as a setting in force, beside a system's own (none: nothing)."""
        return {f"job_{self.kind}_ms": self.ms} if self else {}

    async def run(self, jobs: int = 1) -> None:
        """The work of `jobs` jobs a handler was given together (the module says how)."""
        if self.kind == "wait":
            await asyncio.sleep(self.ms / 1000)
        elif self.kind == "cpu":
            spin(self.ms * jobs)



def spin(ms: float) -> None:
    """Keep this thread busy for `ms` milliseconds of wall time."""
    end = time.perf_counter_ns() + int(ms * 1e6)
    while time.perf_counter_ns() < end:
        pass


def _refusal(kind: Any, ms: Any) -> str | None:
    if kind not in KINDS:
        return f"job work kind {kind!r}: use one of {', '.join(KINDS)}"
    if isinstance(ms, bool) or not isinstance(ms, (int, float)):
        return f"job work ms {ms!r}: give a number of milliseconds"
    if kind == "none":
        return None if ms == 0 else "job work 'none' takes no ms"
    if not 0 < ms <= MAX_MS:
        return f"job work {kind} {ms!r} ms: give more than 0 and at most {MAX_MS:g} ms"
    return None


NO_WORK = JobWork()  # the default everywhere: the handlers of before the axis
