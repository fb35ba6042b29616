"""The kernel `make report` executes notebooks in: ipykernel on uvloop's event loop.

A study's client shares two cores with the server it measures, so every microsecond
of Python per job is taken from the server (the pgbench limit beside each cell shows
how much). uvloop (libuv under asyncio's API) costs a third less CPU per job than the
standard loop at batch 1 here (87 against 127 us per dequeue + ack), and asyncpg is
built for it. The policy is set before ipykernel makes its loop, so the notebook's
`await study.run(...)` runs on it; an interactive JupyterLab kernel keeps the standard
loop (its numbers are for looking, not for publishing).
"""
from __future__ import annotations

import asyncio

import uvloop

asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

if __name__ == "__main__":
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()
