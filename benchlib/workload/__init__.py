"""The workload layer every study runs on: what is sent, what comes back, and how it is counted.

- ledger.py: every job of a cell by the harness's sequence number (carried in its payload):
  when it was meant to be sent, when the system acknowledged it, when it was handled, and
  how often. Lost, duplicated, end-to-end latency and stalls are computed from it, once.
- pacing.py: open-loop producers on intended time (no coordinated omission), their lag.
- drivers.py: consumers per kind of system (pull, log, worker), each recording into the ledger.
- sampler.py: what the server says while a cell runs (tables, sizes, horizon, wait events).
- producers.py: the producers in a process of their own (the capacity study's producers_run:
  apart), what the system acknowledged streamed back into the harness's ledger.
"""
