"""The ack bench's load generator, in a process of its own: `python -m bench.ack_client SIGNING_SECRET`.

Each line on stdin is a burst, `{"url": …, "texts": […], "response_urls": […]}`; the answer on stdout is one line,
the ack latencies (s) in the texts' order. The bench's own process also runs the Slack stand-in, which receives
serve's replies and cards; timing the acks there would share its interpreter lock with that traffic, which the
bare app (it sends nothing) never causes.
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from bot.local.slack import SlackSender


def fire(url: str, secret: str, texts: list[str], response_urls: list[str]) -> list[float]:
    """Send every text as a signed `/finetune` at once (its own response URL each); the ack latencies (s)."""
    sender = SlackSender(url, secret)
    start = threading.Barrier(len(texts))

    def one(job: tuple[str, str]) -> float:
        text, response_url = job
        start.wait()
        sent = sender.slash_command(text, response_url=response_url)
        if sent.status != 200:
            raise RuntimeError(f"ack failed: HTTP {sent.status}")
        return sent.elapsed_s

    with ThreadPoolExecutor(len(texts)) as pool:
        return list(pool.map(one, zip(texts, response_urls, strict=True)))


def main() -> int:
    secret = sys.argv[1]
    for line in sys.stdin:
        burst = json.loads(line)
        print(json.dumps(fire(burst["url"], secret, burst["texts"], burst["response_urls"])), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
