"""The console's ASGI application with a probe for bench/timeline_latency.py: it notes the
wall-clock time at which each audit record is published to the channel layer.

The ledger publishes in ``transaction.on_commit`` (``lib/live.publish_on_commit``), so that
moment is the commit plus the commit hooks that ran before it. Each line of the file named by
``ORBIT_BENCH_PROBE_FILE`` is ``<audit id> <unix time>``. Nothing else changes: the probe calls
the real ``publish`` right after taking the time.

It also notes the pauses of Python's garbage collector that stop the whole process (every
full collection, and any other over 2 ms) as ``gc<generation> <unix time> <milliseconds>``.
With ``ORBIT_BENCH_GC_FREEZE=1`` (an experiment, ``--gc-freeze``) it calls ``gc.freeze()`` once
the application is loaded, so that full collections no longer walk the start-up objects.

    python -m orbit_console.ops.uvicorn_worker --application bench.commit_probe:application
"""

import gc
import os
import time
from typing import Any

from orbit_console.asgi import application
from orbit_console.lib import live

__all__ = ["application"]

_publish = live.publish
_probe = open(os.environ["ORBIT_BENCH_PROBE_FILE"], "a", buffering=1)  # noqa: SIM115


def _timed_publish(group: str, message: dict[str, Any]) -> bool:
    stamp = time.time()
    operation = message.get("operation")
    if isinstance(operation, dict):
        _probe.write(f"{operation['id']} {stamp:.6f}\n")
    return _publish(group, message)


live.publish = _timed_publish

_collection: dict[str, float] = {}


def _note_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _collection["wall"], _collection["clock"] = time.time(), time.perf_counter()
        return
    took_ms = (time.perf_counter() - _collection.get("clock", time.perf_counter())) * 1000
    generation = info.get("generation", 0)
    if generation == 2 or took_ms > 2:
        _probe.write(f"gc{generation} {_collection.get('wall', 0):.6f} {took_ms:.3f}\n")


gc.callbacks.append(_note_collection)

if os.environ.get("ORBIT_BENCH_GC_FREEZE") == "1":
    gc.freeze()
