"""Fans out requests through an official SDK against a provider (the mock), as an agent would.

TASKS asyncio tasks each make PER requests one after another through one shared client of the
`openai` or `anthropic` Python SDK with its default retry settings, optionally behind a token
bucket of RPM requests a minute holding BURST (the aiolimiter pattern: the app's limiter in
front of the SDK, which retries beneath it). Prints one JSON line: each successful request's
latency in seconds (its wait in the limiter and its retries included), the number that
failed, and the process's CPU time over the requests in seconds (the client's own work: the
SDK's, its HTTP client's and the event loop's, imports and set-up excluded).

Usage: python sdk_fanout.py openai|anthropic BASE_URL TASKS PER [RPM BURST]
  BASE_URL: the provider's root, e.g. http://127.0.0.1:8080 (the openai client gets BASE_URL/v1)
"""

import asyncio
import json
import sys
import time


def client_for(sdk, base):
    if sdk == "openai":
        from openai import AsyncOpenAI

        client = AsyncOpenAI(base_url=base + "/v1", api_key="capsize-dummy")

        def call():
            return client.chat.completions.create(
                model="mock", messages=[{"role": "user", "content": "hi"}], max_tokens=1
            )

        return call
    if sdk == "anthropic":
        from anthropic import AsyncAnthropic

        client = AsyncAnthropic(base_url=base, api_key="capsize-dummy")

        def call():
            return client.messages.create(
                model="mock", messages=[{"role": "user", "content": "hi"}], max_tokens=1
            )

        return call
    raise SystemExit(f"unknown sdk {sdk!r}: openai or anthropic")


class TokenBucket:
    """RPM tokens a minute, at most BURST held, full at the start; waiters in arrival order."""

    def __init__(self, rpm, burst):
        self.rate = rpm / 60.0
        self.capacity = burst
        self.tokens = burst
        self.at = time.monotonic()
        self.lock = asyncio.Lock()

    async def acquire(self):
        async with self.lock:
            while True:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
                self.at = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                await asyncio.sleep((1 - self.tokens) / self.rate)


async def main(sdk, base, tasks, per, limiter):
    call = client_for(sdk, base)
    latencies, failed = [], 0

    async def worker():
        nonlocal failed
        for _ in range(per):
            start = time.monotonic()
            try:
                if limiter:
                    await limiter.acquire()
                await call()
                latencies.append(time.monotonic() - start)
            except Exception:  # the SDK gave up: an APIStatusError after its retries
                failed += 1

    cpu = time.process_time()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    cpu = time.process_time() - cpu
    print(json.dumps({"latencies_s": latencies, "failed": failed, "cpu_s": cpu}))


if __name__ == "__main__":
    if len(sys.argv) not in (5, 7):
        raise SystemExit(__doc__)
    sdk, base, tasks, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    limiter = TokenBucket(float(sys.argv[5]), float(sys.argv[6])) if len(sys.argv) == 7 else None
    asyncio.run(main(sdk, base, tasks, per, limiter))
