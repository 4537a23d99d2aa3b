"""How an official SDK divides its own time per request between sending and parsing.

One task makes PER requests one after another through the `openai` or `anthropic` SDK, whose
HTTP transport (httpx2's) is wrapped to note when each request reaches it and when its answer
leaves it. The SDK's send time is from the call to the transport; its parse time, from the
transport to the call's return. Prints one line: each one's median, in ms, and the share of
their sum that is sending (the split `scheduler.client`'s presets use).

Usage: python sdk_own_time.py openai|anthropic BASE_URL PER
"""

import asyncio
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


async def main(sdk, base, per):
    call = client_for(sdk, base)
    sends, parses = [], []
    for _ in range(per):
        marks.clear()
        start = time.perf_counter()
        await call()
        end = time.perf_counter()
        sends.append(marks[0] - start)
        parses.append(end - marks[-1])
    send, parse = statistics.median(sends) * 1e3, statistics.median(parses) * 1e3
    print(f"send {send:.2f} ms  parse {parse:.2f} ms  sending's share {send / (send + parse):.2f}")


if __name__ == "__main__":
    sdk, base, per = sys.argv[1], sys.argv[2], int(sys.argv[3])
    asyncio.run(main(sdk, base, per))
