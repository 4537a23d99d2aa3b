"""A batch request processor whose retries jump the queue, against a provider (the mock).

The shape of the parallel processors people copy for batch jobs: every request is read up
front, a token bucket of RPM requests a minute holding BURST (full at the start) paces them,
and a request that gets a 429 goes straight back to a retry queue that is served before any
request not yet sent. No backoff and no Retry-After: the bucket is the only pacing. A request
gets ATTEMPTS attempts in all, then counts as failed. Each attempt is one HTTP/1.1 POST on its
own connection (standard library only).

Prints one JSON line: each successful request's latency in seconds from the start (its wait
in the bucket and its retries included) and the number that failed.

Usage: python request_processor.py BASE_URL REQUESTS RPM BURST ATTEMPTS
  BASE_URL: the provider's root, e.g. http://127.0.0.1:8080
"""

import asyncio
import collections
import json
import sys
import time
import urllib.parse

BODY = json.dumps(
    {"model": "mock", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
).encode()


async def post(host, port):
    """One attempt: the HTTP status of POST /v1/chat/completions."""
    reader, writer = await asyncio.open_connection(host, port)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(BODY)}\r\n"
        "Connection: close\r\n\r\n"
    )
    writer.write(head.encode() + BODY)
    await writer.drain()
    status_line = await reader.readline()
    await reader.read()
    writer.close()
    return int(status_line.split()[1])


async def main(base, requests, rpm, burst, attempts):
    url = urllib.parse.urlsplit(base)
    host, port = url.hostname, url.port
    rate = rpm / 60.0
    tokens, at = burst, time.monotonic()
    start = at
    fresh = collections.deque(range(requests))
    retries = collections.deque()
    tries = [0] * requests
    latencies, failed, unfinished = [], 0, requests
    wake = asyncio.Event()
    sending = set()

    async def attempt(i):
        nonlocal failed, unfinished
        status = await post(host, port)
        if status == 200:
            latencies.append(time.monotonic() - start)
            unfinished -= 1
        elif tries[i] < attempts:
            retries.append(i)
        else:
            failed += 1
            unfinished -= 1
        wake.set()

    while unfinished:
        now = time.monotonic()
        tokens, at = min(burst, tokens + (now - at) * rate), now
        if tokens < 1:
            await asyncio.sleep((1 - tokens) / rate)
            continue
        if retries:
            i = retries.popleft()
        elif fresh:
            i = fresh.popleft()
        else:
            wake.clear()
            await wake.wait()
            continue
        tokens -= 1
        tries[i] += 1
        task = asyncio.create_task(attempt(i))
        sending.add(task)
        task.add_done_callback(sending.discard)
    print(json.dumps({"latencies_s": latencies, "failed": failed}))


if __name__ == "__main__":
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    base = sys.argv[1]
    requests, rpm, burst, attempts = (int(a) for a in sys.argv[2:])
    asyncio.run(main(base, requests, rpm, burst, attempts))
