#!/usr/bin/env python3
"""OTLP JSON traces of an agent, as the OpenTelemetry Collector's file exporter writes them, for
the calibration benchmark (scripts/calibrate-bench.sh): SPANS spans (about), closed-loop sessions,
each query a model turn around 3 rounds of 4 tool calls. Drawn from a seeded RNG: the same
arguments write the same file. Usage: gen_traces.py SPANS OUT [SESSIONS]
(tests/data/calibrate/support-agent.jsonl is `gen_traces.py 1700 ... 4`)"""
import json
import math
import random
import sys

spans_wanted, out = int(sys.argv[1]), sys.argv[2]
rng = random.Random(7)
per_query = 4 + 12 + 1
queries = max(1, spans_wanted // per_query)
sessions = int(sys.argv[3]) if len(sys.argv) > 3 else max(1, queries // 60)
epoch = 1_760_000_000_000_000_000


def attr(k, v):
    if isinstance(v, str):
        return {"key": k, "value": {"stringValue": v}}
    return {"key": k, "value": {"intValue": str(v)}}


def span(trace, sid, parent, name, start_ms, end_ms, attrs):
    return {
        "traceId": f"{trace:032x}", "spanId": f"{sid:016x}",
        "parentSpanId": f"{parent:016x}" if parent else "", "name": name, "kind": 1,
        "startTimeUnixNano": str(epoch + int(start_ms * 1e6)),
        "endTimeUnixNano": str(epoch + int(end_ms * 1e6)), "attributes": attrs, "status": {},
    }


with open(out, "w") as f:
    batch, trace, sid, done = [], 0, 0, 0
    clocks = [rng.expovariate(1 / 20000) for _ in range(sessions)]
    while done < queries:
        s = done % sessions
        t, trace = clocks[s], trace + 1
        sid += 1
        root, now, pending = sid, t, []
        for turn in range(4):
            d = rng.lognormvariate(7.2, 0.5)
            sid += 1
            pending.append(span(trace, sid, root, "chat gpt-4o", now, now + d, [
                attr("gen_ai.operation.name", "chat"), attr("gen_ai.provider.name", "openai"),
                attr("gen_ai.request.model", "gpt-4o"),
                attr("gen_ai.usage.input_tokens", rng.randint(2000, 3200)),
                attr("gen_ai.usage.output_tokens", 200), attr("gen_ai.request.max_tokens", 500)]))
            now += d
            if turn == 3:
                break
            end = now
            for _ in range(4):
                name = "kb_search" if rng.random() < 0.75 else "crm_lookup"
                d = rng.lognormvariate(5.5, 0.6) if name == "kb_search" else rng.uniform(100, 600)
                sid += 1
                pending.append(span(trace, sid, root, f"execute_tool {name}", now, now + d, [
                    attr("gen_ai.operation.name", "execute_tool"), attr("gen_ai.tool.name", name)]))
                end = max(end, now + d)
            now = end
        pending.append(span(trace, root, 0, "invoke_agent", t, now, [
            attr("gen_ai.operation.name", "invoke_agent"),
            attr("gen_ai.conversation.id", f"session-{s}")]))
        clocks[s] = now + rng.expovariate(1 / 20000)
        batch.extend(pending)
        done += 1
        if len(batch) >= 512 or done == queries:
            f.write(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": batch}]}]}) + "\n")
            batch = []
