"""Lowering: atoms to a tape of instructions with one cost model, and its schedule.

    tape.py      lower(): the instructions every backend prints; op counts
    schedule.py  order and slots for few live values (register pressure) or depth first
"""
from .schedule import Schedule, schedule
from .tape import Instr, Tape, lower, op_counts

__all__ = ["Instr", "Schedule", "Tape", "lower", "op_counts", "schedule"]
