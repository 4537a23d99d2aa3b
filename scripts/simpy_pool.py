#!/usr/bin/env python3
"""The pool-40 benchmark model in SimPy, the comparison point of scripts/simpy-compare.sh.

N calls through a pool of 40 (simpy.Resource(env, capacity=40)), each served for
Uniform[0.2, 0.9] s of simulated time (random.Random(seed)); no rate limits, retries or errors.

Shape (default, "closed"): 40 session processes, each issuing calls back to back, every call
going through pool.request() / timeout / release, until N calls have been issued. This is
the same shape as scenarios/bench/pool-40.toml (40 closed-loop sessions of 1-call queries,
max_concurrency 40), it keeps exactly 40 in flight, holds O(40) processes whatever N is, and
is the fastest idiomatic SimPy form that still goes through the Resource.
"submit-all" shape: N processes created at t=0, each requesting the pool (O(N) memory; latency
from submission then includes the time queued for the pool).

Usage: scripts/simpy_pool.py N SEED [closed|submit-all]
Prints one JSON object; wall_s is time.perf_counter() and cpu_s time.process_time() around
env.run() alone (process setup for "closed" is 40 generators; for "submit-all" the N
env.process() calls are timed separately as setup_wall_s).
"""
import json
import platform
import random
import sys
import time

import simpy

CAPACITY = 40


def main():
    n = int(sys.argv[1])
    seed = int(sys.argv[2])
    shape = sys.argv[3] if len(sys.argv) > 3 else "closed"
    rng = random.Random(seed)
    uniform = rng.uniform
    env = simpy.Environment()
    pool = simpy.Resource(env, capacity=CAPACITY)
    stats = {"calls": 0, "latency": 0.0, "service": 0.0}

    # The call's body is written out in each shape rather than shared through `yield from`:
    # delegation would add a generator frame per call and slow SimPy down for the comparison.
    if shape == "closed":
        issued = [0]

        def session():
            while issued[0] < n:
                issued[0] += 1
                submitted = env.now
                with pool.request() as req:
                    yield req
                    service = uniform(0.2, 0.9)
                    yield env.timeout(service)
                stats["calls"] += 1
                stats["service"] += service
                stats["latency"] += env.now - submitted

        t0 = time.perf_counter()
        for _ in range(CAPACITY):
            env.process(session())
        setup = time.perf_counter() - t0
    elif shape == "submit-all":
        def call():
            submitted = env.now
            with pool.request() as req:
                yield req
                service = uniform(0.2, 0.9)
                yield env.timeout(service)
            stats["calls"] += 1
            stats["service"] += service
            stats["latency"] += env.now - submitted

        t0 = time.perf_counter()
        for _ in range(n):
            env.process(call())
        setup = time.perf_counter() - t0
    else:
        sys.exit(f"unknown shape {shape!r} (closed | submit-all)")

    t0, c0 = time.perf_counter(), time.process_time()
    env.run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0

    calls = stats["calls"]
    assert calls == n, (calls, n)
    print(json.dumps({
        "tool": "simpy",
        "shape": shape,
        "calls": calls,
        "simulated_seconds": round(env.now, 3),
        "mean_latency_s": round(stats["latency"] / calls, 6),
        "mean_service_s": round(stats["service"] / calls, 6),
        "setup_wall_s": round(setup, 4),
        "wall_s": round(wall, 4),
        "calls_per_wall_s": round(calls / wall, 1),
        "cpu_s": round(cpu, 4),
        "calls_per_cpu_s": round(calls / cpu, 1),
        "simpy_version": simpy.__version__,
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
    }))


if __name__ == "__main__":
    main()
