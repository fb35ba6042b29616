"""One module per study, each with a frozen `Params` and `async def run(params, ...)`.

STUDIES is the registry the CLI, the sweep runner and the report look studies up in.
"""
from __future__ import annotations

from types import ModuleType

from benchlib.studies import capacity, chaos, drain, durability, enqueue, pressure, tuning, xmin_horizon

STUDIES: dict[str, ModuleType] = {"drain": drain, "xmin_horizon": xmin_horizon, "durability": durability,
                                   "capacity": capacity, "enqueue": enqueue, "chaos": chaos, "tuning": tuning,
                                   "pressure": pressure}
