"""The job-work axis's words and refusals (workload/job_work.py), and the work it adds."""
from __future__ import annotations

import asyncio
import time

import pytest

from benchlib.errors import BenchError
from benchlib.studies.tuning import Params
from benchlib.workload.job_work import NO_WORK, JobWork


@pytest.mark.parametrize("text, kind, ms", [("none", "none", 0), ("wait 1 ms", "wait", 1), ("cpu 0.5 ms", "cpu", 0.5)])
def test_a_profile_names_the_work_in_words(text, kind, ms):
    work = JobWork.parse(text)
    assert (work.kind, work.ms, str(work)) == (kind, ms, text)
    assert bool(work) == (kind != "none") and JobWork.parse(str(work)) == work


@pytest.mark.parametrize("text, says", [
    ("wait", "write 'none', 'wait N ms' or 'cpu N ms'"), ("sleep 1 ms", "write 'none'"), (1, "write 'none'"),
    ("wait 0 ms", "more than 0"), ("cpu 5000 ms", "at most 1000"),
])
def test_bad_words_are_refused_saying_what_to_write(text, says):
    with pytest.raises(ValueError, match=says):
        JobWork.parse(text)


def test_the_work_request_carries_what_an_adapter_runs_and_none_carries_nothing():
    assert NO_WORK.request() is None and NO_WORK.settings() == {} and not NO_WORK
    work = JobWork("wait", 2)
    assert work.request() == {"kind": "wait", "ms": 2} and work.settings() == {"job_wait_ms": 2}
    assert JobWork.from_request(work.request()) == work and JobWork.from_request(None) == NO_WORK
    for bad in ({"kind": "wait"}, {"kind": "nap", "ms": 1}, {"kind": "wait", "ms": True}, "wait 1 ms"):
        with pytest.raises(ValueError):
            JobWork.from_request(bad)


async def test_the_work_takes_at_least_what_it_says():
    """A wait of 20 ms for a batch of 10 takes at least 20 ms; 5 ms of CPU for each of 4 jobs, 20 ms."""
    for work, jobs in ((JobWork("wait", 20), 10), (JobWork("cpu", 5), 4)):
        started = time.perf_counter()
        await work.run(jobs=jobs)
        assert time.perf_counter() - started >= 0.020, work
    await asyncio.wait_for(NO_WORK.run(jobs=1000), 1)  # nothing to do


def test_the_tuning_study_takes_job_work_in_words_and_refuses_bad_ones_first():
    assert Params(job_work="wait 1.0 ms").job_work == "wait 1 ms" and Params().job_work == "none"
    with pytest.raises(BenchError, match="job work 'sleep': write 'none'"):
        Params(job_work="sleep")
