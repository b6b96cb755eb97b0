"""Writes the examples/judgments-* folders: an LLM judge's A/B evaluation as a judge pipeline writes it
(docs/llm-judge.md), one ``judgments.jsonl`` line per judgment.

Re-run after changing the layout: ``python examples/make_judgment_examples.py``.
Which checks must fail and pass on each folder is declared on the checks (``fails_on``/``passes_on``);
a sibling ``.expect.yaml`` holds its description and the session's ``args``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).parent
CAND, BASE = "model-b", "model-a"
JUDGE = "qwen2.5-7b-instruct"


def judgment(item: str, winner: str | None, first: str, n: int, error: str | None = None) -> dict:
    """One judgment: ``first`` is the answer shown first (each item is judged in both orders)."""
    second = BASE if first == CAND else CAND
    return {
        "item": item,
        "candidate": CAND,
        "baseline": BASE,
        "winner": winner,
        "error": error,
        "judge": JUDGE,
        "sample": 0,
        "order": [first, second],
        "timestamp": f"2026-12-04T09:{n // 60:02d}:{n % 60:02d}Z",
    }


def both_orders(item: str, baseline_first: str | None, candidate_first: str | None, n: int, **extra) -> list[dict]:
    """The item judged twice: the winner with the baseline's answer shown first, then with the candidate's."""
    return [judgment(item, baseline_first, BASE, n, **extra), judgment(item, candidate_first, CAND, n + 1)]


def write(name: str, rows: list[dict]) -> None:
    root = HERE / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    (root / "judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def main() -> None:
    # Ten items model-b wins in both orders, one model-a wins, one the order decided (position bias: a tie).
    rows: list[dict] = []
    for i in range(10):
        rows += both_orders(f"prompt-{i:03d}", CAND, CAND, 2 * i)
    rows += both_orders("prompt-010", BASE, BASE, 20)
    rows += both_orders("prompt-011", BASE, CAND, 22)  # whichever answer came first won
    write("judgments-promote", rows)

    # The same ten won items; on two more the judge failed: an error, and a null winner without scores.
    failed = rows[:20]
    failed += both_orders("prompt-012", None, CAND, 20, error="ReadTimeout: judge did not answer within 60 s")
    failed += [judgment("prompt-013", None, BASE, 22), judgment("prompt-013", None, CAND, 23)]
    write("judgments-judge-failed", failed)


if __name__ == "__main__":
    main()
