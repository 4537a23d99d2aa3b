"""An agent as agents are built, instrumented with OpenTelemetry, for `capsize calibrate`.

Each of SESSIONS users (a thread each) asks a question, waits for the answer, thinks
(exponential, THINK_MS on average) and asks again, until DURATION_S have passed. A question is
an `invoke_agent` span holding: a model turn through the official openai SDK, one round of TOOLS
tool calls run in parallel (each an `execute_tool` span; the tool itself runs here: a sleep of a
log-normal time, median 80 ms), and a final model turn. The model turns' `chat` spans come from
the official OpenAI instrumentation (opentelemetry-instrumentation-openai-v2); every span goes to
OTEL_EXPORTER_OTLP_ENDPOINT over OTLP/HTTP protobuf, which `capsize exec` points at its mock.
The SDK keeps its own retry rules (openai-python's: 2 retries, Retry-After honoured).

Usage: python otel_agent.py SESSIONS DURATION_S [THINK_MS] [TOOLS] [SEED]
Prints one JSON line: queries answered and failed. Exits 0.
"""

import contextvars
import json
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(), schedule_delay_millis=500))
trace.set_tracer_provider(provider)
OpenAIInstrumentor().instrument()
tracer = trace.get_tracer("otel_agent")


def main(sessions, duration_s, think_ms, tools, seed):
    client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    pool = ThreadPoolExecutor(max_workers=sessions * tools)
    end = time.monotonic() + duration_s
    done = {"answered": 0, "failed": 0}
    lock = threading.Lock()

    def turn(prompt):
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=200,
        )

    def tool(name, seconds):
        with tracer.start_as_current_span(
            f"execute_tool {name}",
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name},
        ):
            time.sleep(seconds)

    def user(n):
        rng = random.Random(seed * 1000 + n)
        time.sleep(rng.uniform(0, think_ms / 1000))
        while time.monotonic() < end:
            with tracer.start_as_current_span(
                "invoke_agent support",
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.conversation.id": f"user-{n}",
                },
            ):
                try:
                    turn("x" * 4000)  # about 1,000 prompt tokens
                    calls = [
                        pool.submit(
                            contextvars.copy_context().run,
                            tool,
                            rng.choice(["search", "search", "lookup"]),
                            rng.lognormvariate(-2.5, 0.5),
                        )
                        for _ in range(tools)
                    ]
                    for c in calls:
                        c.result()
                    turn("x" * 6000)
                    ok = True
                except openai.APIError:
                    ok = False
            with lock:
                done["answered" if ok else "failed"] += 1
            time.sleep(rng.expovariate(1000 / think_ms))

    users = [threading.Thread(target=user, args=(n,)) for n in range(sessions)]
    for u in users:
        u.start()
    for u in users:
        u.join()
    pool.shutdown()
    provider.shutdown()  # exports what is left
    print(json.dumps(done), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]),
        float(args[1]),
        float(args[2]) if len(args) > 2 else 1000.0,
        int(args[3]) if len(args) > 3 else 3,
        int(args[4]) if len(args) > 4 else 1,
    )
