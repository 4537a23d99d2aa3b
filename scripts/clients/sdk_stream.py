"""Streams one answer through an official SDK's own streaming helper against a provider (the
mock), as an agent that shows tokens as they come would, and prints what the client saw as one
JSON line: the text, the output tokens and the stop reason of the final message the helper
assembles, how many text events arrived, and the seconds from the request to the first text
event and to the end.

Usage: python sdk_stream.py openai|anthropic BASE_URL MAX_TOKENS
  BASE_URL: the provider's root, e.g. http://127.0.0.1:8080 (the openai client gets BASE_URL/v1)
"""

import json
import sys
import time

MESSAGES = [{"role": "user", "content": "hello"}]


def main():
    sdk, base, max_tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
    first = None
    events = 0
    if sdk == "openai":
        from openai import LengthFinishReasonError, OpenAI

        client = OpenAI(base_url=base + "/v1", api_key="capsize-dummy", max_retries=0)
        start = time.monotonic()
        with client.chat.completions.stream(
            model="mock",
            messages=MESSAGES,
            max_tokens=max_tokens,
            stream_options={"include_usage": True},
        ) as stream:
            for event in stream:
                # The first chunk carries the role and an empty content: not a token.
                if event.type == "content.delta" and event.delta:
                    first = first if first is not None else time.monotonic() - start
                    events += 1
            try:
                final = stream.get_final_completion()
            except LengthFinishReasonError as cut:
                # The helper refuses to parse an answer max_tokens cut short, as it does
                # against the API; the completion is still there.
                final = cut.completion
        text = final.choices[0].message.content
        output_tokens = final.usage.completion_tokens
        stop = final.choices[0].finish_reason
    elif sdk == "anthropic":
        from anthropic import Anthropic

        client = Anthropic(base_url=base, api_key="capsize-dummy", max_retries=0)
        start = time.monotonic()
        with client.messages.stream(
            model="mock", max_tokens=max_tokens, messages=MESSAGES
        ) as stream:
            for _ in stream.text_stream:
                first = first if first is not None else time.monotonic() - start
                events += 1
            final = stream.get_final_message()
        text = "".join(b.text for b in final.content if b.type == "text")
        output_tokens = final.usage.output_tokens
        stop = final.stop_reason
    else:
        sys.exit(f"unknown SDK {sdk!r}: openai or anthropic")
    print(
        json.dumps(
            {
                "text": text,
                "output_tokens": output_tokens,
                "stop": stop,
                "events": events,
                "first_s": first,
                "total_s": time.monotonic() - start,
            }
        )
    )


if __name__ == "__main__":
    main()
