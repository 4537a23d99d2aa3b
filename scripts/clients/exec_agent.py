"""A small agent for `capsize exec`: fans out tool calls through the official openai SDK.

It reads OPENAI_BASE_URL and OPENAI_API_KEY from its environment, as any openai-SDK agent does,
so it runs unchanged against OpenAI or, under `capsize exec`, against the mock. Three phases,
each waiting for the last, every call a chat completion through one AsyncOpenAI client:

1. ABANDON calls with a client timeout of 0.5 s and no retries: the provider charges each and
   takes 2 s to answer, so each is abandoned (its connection closed): an orphan apiece.
2. FANOUT calls at once (asyncio.gather), no retries: the minute's RPM less the ABANDON already
   charged are served, the rest refused with 429 (the SDK raises RateLimitError).
3. RETRIED calls with max_retries=1, each with its own Idempotency-Key header (the pinned SDKs
   send none by default: their `_idempotency_header` is None; `extra_headers` go unchanged on
   every attempt): the minute is spent, so each gets a 429, waits its Retry-After, is refused
   again and fails.

Against scenarios/exec/sdk-agent.toml (10 RPM in whole minutes, 2 s service, Retry-After 1 s)
with the defaults (3, 12, 2), the provider sees exactly: 3 + 12 + 2 x 2 = 19 requests, 3 + 7 =
10 charged (3 of them orphans), 5 + 4 = 9 rate-limited, 2 retries, each after a wait of 1 s.
Exact because only the number of requests charged in the first minute decides which are served
(not their order), each phase waits for the previous one, and the whole run takes a few seconds
of that minute.

Prints one JSON line: what the agent saw, per outcome. Exits 0.

Usage: python exec_agent.py [ABANDON FANOUT RETRIED]
"""

import asyncio
import json
import sys
import uuid

import openai
from openai import AsyncOpenAI


async def main(abandon, fanout, retried):
    client = AsyncOpenAI(max_retries=0)  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    seen = {"served": 0, "rate_limited": 0, "timed_out": 0, "other_error": 0}

    async def tool_call(n, **options):
        try:
            await client.with_options(**options).chat.completions.create(
                model="mock",
                messages=[{"role": "user", "content": f"tool call {n}"}],
                max_tokens=16,
                extra_headers={"Idempotency-Key": f"exec-agent-{uuid.uuid4()}"},
            )
            seen["served"] += 1
        except openai.RateLimitError:
            seen["rate_limited"] += 1
        except openai.APITimeoutError:
            seen["timed_out"] += 1
        except openai.APIError:
            seen["other_error"] += 1

    await asyncio.gather(*(tool_call(n, timeout=0.5) for n in range(abandon)))
    await asyncio.gather(*(tool_call(n) for n in range(fanout)))
    await asyncio.gather(*(tool_call(n, max_retries=1) for n in range(retried)))
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    if len(sys.argv) not in (1, 4):
        raise SystemExit(__doc__)
    counts = [int(a) for a in sys.argv[1:]] or [3, 12, 2]
    asyncio.run(main(*counts))
