"""Workload registry: every module in this package that defines NAME and IMPLS is a workload.

A workload module provides NAME, DEFAULT_N, make_inputs(n, seed) -> inputs,
reference(inputs) -> tuple of NumPy arrays, and IMPLS {name: setup(inputs, opts) -> run}; optionally
summary(results, opts) -> str, a line bench/run.py prints (and saves) after the workload's table,
and GPU_IMPLS {name: setup(inputs, opts) -> (step, fetch)} for bench/gpu.py (see gpu_common.py).
"""
import importlib
import pkgutil


def load_all():
    """Imports every workload module here and returns {NAME: module}, in file-name order."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "NAME") and hasattr(mod, "IMPLS"):
            found[mod.NAME] = mod
    return found
