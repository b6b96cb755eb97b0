"""Secrets never leave through evidence: every quote passes through here
before it reaches a terminal, a JUnit file, a JSON, HTML or markdown report
or the verdict record.

A maintained table of our own, not ``detect-secrets``: measured on quoted log
lines, detect-secrets took ~4 ms a line (this table: a few microseconds), cost
~0.9 s to import, pulled in requests and PyYAML, and flagged words such as
``curl``, ``-H`` and ``http`` (so it could not be used to mask spans without
destroying the evidence). Each row names the family it covers; the
planted-secrets corpus (tests/test_secrets.py) holds a form for every row.
Patterns are linear: no nested quantifiers over overlapping classes."""

from __future__ import annotations

import re

MASK = "[REDACTED]"

# Words that make a key=value, "key": "value" or --key value pair secret.
_SECRET_NAME = (
    r"(?:api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?|secret(?:[_-]?access)?(?:[_-]?key)?|"
    r"private[_-]?key|account[_-]?key|shared[_-]?access[_-]?key|password|passwd|(?<=_)pwd|"
    r"token|credentials?|client[_-]?secret)"
)
_VALUE = r"[^\s\"',;}&]+"


class _UrlUserinfo:
    """``scheme://userinfo@host``: the userinfo, up to the last '@' of the
    URL's token (a run without whitespace, quotes or angle brackets), is
    masked. Linear: each scheme is looked at once, and a scheme inside a token
    already read is not looked at again."""

    _SCHEME = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]{0,30}://")
    _TOKEN_END = re.compile(r"[\s\"'<>]")
    pattern = _SCHEME.pattern

    def sub(self, replacement: str, text: str) -> str:
        out: list[str] = []
        kept = 0  # text[:kept] is already in out
        at = 0
        while True:
            m = self._SCHEME.search(text, at)
            if m is None:
                break
            end_match = self._TOKEN_END.search(text, m.end())
            end = end_match.start() if end_match else len(text)
            last_at = text.rfind("@", m.end(), end)
            if last_at >= 0:
                out += [text[kept : m.end()], replacement]
                kept = last_at + 1
            at = max(end, m.end())
        out.append(text[kept:])
        return "".join(out)


_PATTERNS: list[tuple[str, re.Pattern[str] | _UrlUserinfo, str]] = [
    # PEM private keys: the whole block when it is on one quote, the header line otherwise.
    (
        "pem",
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"),
        MASK,
    ),
    # A quoted line that is all base64 (the body of a PEM block quoted line by line).
    # Mixed case required: a hex digest (sha256 of a file, a commit) is not a key.
    (
        "pem-body",
        re.compile(r"^(?=[^\n]*[A-Z])(?=[^\n]*[a-z])[ \t]*[A-Za-z0-9+/]{40,}={0,2}[ \t]*$", re.MULTILINE),
        MASK,
    ),
    # Authorization / Proxy-Authorization headers, any scheme.
    (
        "authorization",
        re.compile(
            r"(?i)((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token|"
            r"digest|negotiate)\s+)?[^\s\"',}]+"
        ),
        r"\1" + MASK,
    ),
    # Cookies and API-key headers: the value runs to the end of the header.
    ("cookie-header", re.compile(r"(?i)(\b(?:set-)?cookie[\"']?\s*:\s*)[^\r\n\"']+"), r"\1" + MASK),
    (
        "key-header",
        re.compile(
            r"(?i)(\bx-(?:[a-z0-9]{1,30}-){0,4}(?:api-?key|key|token|secret|auth)[\"']?\s*:\s*[\"']?)"
            r"[^\s\"',}]+"
        ),
        r"\1" + MASK,
    ),
    # A bare bearer credential anywhere ("Bearer eyJ...").
    ("bearer", re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1" + MASK),
    # JSON Web Tokens wherever they stand.
    # (Only where a run of token characters begins: "eyJ-" repeated is one candidate, not n.)
    ("jwt", re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}(?:\.[A-Za-z0-9_-]*)?"), MASK),
    # Credentials inside URLs, any scheme case, user:password or a token alone; the
    # password may hold '/' or '@', so the userinfo runs to the token's last '@'.
    # Not one regex: "a://" repeated made the old one quadratic (issue #27).
    ("url-userinfo", _UrlUserinfo(), MASK + "@"),
    # --hf-token X, --api-key=X, --password X (the last word of the option names the secret).
    (
        "cli-option",
        re.compile(r"(?i)(--(?:[a-z0-9]{1,30}[-_]){0,8}" + _SECRET_NAME + r"(?:=|\s+))(?!-)" + _VALUE),
        r"\1" + MASK,
    ),
    # "password": "x", 'token': 'x' (JSON, Python reprs, YAML flow).
    ("quoted-field", re.compile(r"(?i)(" + _SECRET_NAME + r"[\"']\s*:\s*[\"'])[^\"']*"), r"\1" + MASK),
    # (Matched from the secret word on, so the name's prefix costs nothing to skip.)
    # NAME_API_KEY=value, HF_TOKEN: value, DB_PWD=x, passwd=x, AWS_SECRET_ACCESS_KEY=x ...
    (
        "env-assignment",
        re.compile(r"(?i)(" + _SECRET_NAME + r"\b[\"']?\s*[=:]\s*[\"']?)(?![\s\"'])" + _VALUE),
        r"\1" + MASK,
    ),
    # Vendor token formats, recognisable without a name before them.
    ("huggingface", re.compile(r"\bhf_[A-Za-z0-9]{20,}"), MASK),
    ("openai-anthropic", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}"), MASK),
    ("stripe", re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"), MASK),
    ("github", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), MASK),
    ("gitlab", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), MASK),
    ("slack", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"), MASK),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), MASK),
    ("google-oauth", re.compile(r"\bya29\.[0-9A-Za-z_\-]{20,}"), MASK),
    ("aws-access-key-id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"), MASK),
    ("npm", re.compile(r"\bnpm_[A-Za-z0-9]{30,}"), MASK),
    ("pypi", re.compile(r"\bpypi-[A-Za-z0-9_\-]{40,}"), MASK),
    # W&B keys: 40 hex characters (optionally local-), after wandb context.
    ("wandb", re.compile(r"(?i)(wandb[^\n]{0,40}?)\b(?:local-)?[0-9a-f]{40}\b"), r"\1" + MASK),
]


# One of these (lower case) is in every match of _SECRET_NAME.
_SECRET_WORDS = ("key", "secret", "passw", "pwd", "token", "credential")

# Per family, literals that every match contains, case-folded. A row runs only on
# text whose case-folded form holds one of them (casefold, not lower: it equates
# what re.IGNORECASE does, "ſ" and "s"); a family not listed always runs. Most
# quoted text holds no secret: the whole table costs ~300 µs per 200 characters,
# the triggers ~20 µs (measured). Replacements only remove text, so triggers
# read before the first row stay valid for the last.
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "pem": ("-----begin",),
    "authorization": ("authorization",),
    "cookie-header": ("cookie",),
    "key-header": ("x-",),
    "bearer": ("bearer",),
    "jwt": ("eyj",),
    "url-userinfo": ("://",),
    "cli-option": ("--",),
    "quoted-field": _SECRET_WORDS,
    "env-assignment": _SECRET_WORDS,
    "huggingface": ("hf_",),
    "openai-anthropic": ("sk-",),
    "stripe": ("k_live_", "k_test_"),
    "github": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab": ("glpat-",),
    "slack": ("xox",),
    "google-api-key": ("aiza",),
    "google-oauth": ("ya29.",),
    "aws-access-key-id": ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
    "npm": ("npm_",),
    "pypi": ("pypi-",),
    "wandb": ("wandb",),
}
_ROWS = [(pattern, replacement, _TRIGGERS.get(family, ())) for family, pattern, replacement in _PATTERNS]
_ALL_TRIGGERS = tuple(sorted({t for triggers in _TRIGGERS.values() for t in triggers}))


def redact(text: str) -> str:
    if not text:
        return text
    folded = text.casefold()
    present = {t for t in _ALL_TRIGGERS if t in folded}
    for pattern, replacement, triggers in _ROWS:
        if not triggers or not present.isdisjoint(triggers):
            text = pattern.sub(replacement, text)
    return text
