"""How an official SDK's own time per request divides, and what its first requests cost.

One task makes requests one after another through the `openai` or `anthropic` SDK, whose HTTP
transport (httpx2's) is wrapped to note when each request reaches it and when its answer
leaves it. The SDK's send time is from the call to the transport; its parse time, from the
transport to the call's return. Prints one JSON line, times in ms:

- `send`, `parse`: their medians over PER warm requests, and `sending_share`, the share of
  their sum that is sending (the split `scheduler.client`'s presets use);
- `warmup`: the process's first request over a new client's first (what the SDK builds and
  imports on first use, once a process);
- `connect`: a new client's first request over a warm one (opening a connection), the median
  of PER new clients.

Usage: python sdk_own_time.py openai|anthropic BASE_URL PER
"""

import asyncio
import json
import statistics
import sys
import time

import httpx2

from sdk_fanout import client_for

marks = []
_send = httpx2.AsyncHTTPTransport.handle_async_request


async def noted(self, request):
    marks.append(time.perf_counter())
    response = await _send(self, request)
    marks.append(time.perf_counter())
    return response


httpx2.AsyncHTTPTransport.handle_async_request = noted


async def timed(call):
    """One request: its send time, parse time and whole time (s)."""
    marks.clear()
    start = time.perf_counter()
    await call()
    end = time.perf_counter()
    return marks[0] - start, end - marks[-1], end - start


async def main(sdk, base, per):
    first = (await timed(client_for(sdk, base)))[2]
    call = client_for(sdk, base)
    await timed(call)
    warm = [await timed(call) for _ in range(per)]
    fresh = [(await timed(client_for(sdk, base)))[2] for _ in range(per)]
    ms = lambda xs: statistics.median(xs) * 1e3
    send, parse, whole = ms([w[0] for w in warm]), ms([w[1] for w in warm]), ms([w[2] for w in warm])
    new = ms(fresh)
    print(json.dumps({
        "send": round(send, 3),
        "parse": round(parse, 3),
        "sending_share": round(send / (send + parse), 3),
        "warmup": round(first * 1e3 - new, 2),
        "connect": round(new - whole, 3),
    }))


if __name__ == "__main__":
    sdk, base, per = sys.argv[1], sys.argv[2], int(sys.argv[3])
    asyncio.run(main(sdk, base, per))
