"""Secrets never leave through evidence: every quote passes through here
before it reaches a terminal, a JUnit file or a JSON report."""

from __future__ import annotations

import re

MASK = "[REDACTED]"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # Authorization / Proxy-Authorization headers, any scheme.
    (re.compile(r"(?i)((?:proxy-)?authorization\"?\s*[:=]\s*\"?)(?:bearer\s+|basic\s+|token\s+)?[^\s\"',}]+"), r"\1" + MASK),
    # NAME_API_KEY=value, NAME_TOKEN: value, WANDB_API_KEY, HF_TOKEN, LM_API_TOKEN ...
    (re.compile(r"(?i)(\b[A-Z0-9_]*(?:API_KEY|_TOKEN|_SECRET|PASSWORD|ACCESS_KEY)\"?\s*[=:]\s*\"?)[^\s\"',}]+"), r"\1" + MASK),
    # Hugging Face tokens.
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), MASK),
    # OpenAI-style and Anthropic-style keys.
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}"), MASK),
    # W&B keys: 40 hex characters (optionally with a local- prefix), after wandb context.
    (re.compile(r"(?i)(wandb[^\n]{0,40}?)\b(?:local-)?[0-9a-f]{40}\b"), r"\1" + MASK),
    # Credentials inside URLs: scheme://user:password@host
    (re.compile(r"([a-z][a-z0-9+.\-]*://[^/\s:@]+:)[^/\s@]+@"), r"\1" + MASK + "@"),
    # GitHub tokens.
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), MASK),
]


def redact(text: str) -> str:
    if not text:
        return text
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
