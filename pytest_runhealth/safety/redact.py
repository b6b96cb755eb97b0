"""Secrets never leave through evidence: every text the plugin shows passes
through :func:`redact` on its way out -- findings and evidence when they are
made (finding.py), and again at each writer's last step: the terminal and
JUnit (printable.py's report hook), the JSON report (results.write_json), the
HTML page (reports/svg.text, its one escape), the Markdown summary
(reports/markdown.cell), every watch line and notification (watch/loop.say,
watch/notify.send). Redacting twice changes nothing.

A maintained table of our own, not ``detect-secrets``: measured on quoted log
lines, detect-secrets took ~4 ms a line (this table: a few microseconds), cost
~0.9 s to import, pulled in requests and PyYAML, and flagged words such as
``curl``, ``-H`` and ``http`` (so it could not be used to mask spans without
destroying the evidence). The forms it covers follow the rule sets gitleaks
(config/gitleaks.toml, https://github.com/gitleaks/gitleaks) and detect-secrets
(detect_secrets/plugins, https://github.com/Yelp/detect-secrets) maintain; the
code is ours. Each row names the family it covers; the planted-secrets corpus
(tests/test_secrets.py) holds a form for every row and the look-alikes that
must survive (a 40-hex commit, ``eos_token: </s>``, ``--pad-token 0``).

Patterns are linear: no nested quantifiers over overlapping classes, and no
search that can start inside a run it then scans and fails (tests/test_badinput.py
times them on adversarial repeats)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable

MASK = "[REDACTED]"

# Names whose value is a secret whatever it looks like (a password may be "pw").
_PASSWORD_NAME = r"(?:password|passwd|passphrase|(?<=[_\-\"'.])pwd|(?<![a-z])pwd(?![a-z])|(?<=[_\-])pass(?![a-z]))"
# Names whose value is a secret when it looks like one (not "</s>", "0", "loaded").
_KEY_NAME = (
    r"(?:api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?|secret(?:[_-]?access)?(?:[_-]?key)?|"
    r"private[_-]?key|account[_-]?key|shared[_-]?access[_-]?key|token|credentials?|client[_-]?secret|"
    r"(?<=[_\-])key(?![a-z])|(?<=[_\-])auth(?![a-z])|subscription[_-]?key|signing[_-]?key)"
)
_SECRET_NAME = r"(?:" + _PASSWORD_NAME + r"|" + _KEY_NAME + r")"
_VALUE = r"[^\s\"',;}&\\]+"
_PASSWORD_ONLY = re.compile(r"(?i)" + _PASSWORD_NAME)
# Special tokens and placeholders that are not secrets: "</s>", "<|endoftext|>", "[PAD]", "${VAR}", "****".
_NOT_A_SECRET = re.compile(r"^(?:<[^>]*>?|\[[^\]]*\]?|\$\{?\w*\}?|\*+|x+|null|none|true|false|nil|-|/)$", re.I)


def _secretish(value: str) -> bool:
    """A value that could be a credential: 8 characters or more, not a
    special token or placeholder, not a plain lower-case word."""
    if len(value) < 8 or _NOT_A_SECRET.match(value):
        return False
    return not value.isalpha() or not value.islower()


def _masking(name_group: int = 1, value_group: int = 2) -> Callable[[re.Match[str]], str]:
    """Replace the value after a secret name: always after a password name,
    after any other name only when the value looks like a secret."""

    def replace(m: re.Match[str]) -> str:
        head, value = m.group(name_group), m.group(value_group)
        rest = ""
        if m.start() and m.string[m.start() - 1] == "/":  # a path segment ("s3://b/token=abc/part-0")
            value, slash, after = value.partition("/")
            rest = slash + after
        if _PASSWORD_ONLY.search(head) or _secretish(value):
            return head + MASK + rest
        return m.group(0)

    return replace


def _basic(m: re.Match[str]) -> str:
    """``Basic <base64 of user:password>``: masked when it decodes to a pair."""
    try:
        decoded = base64.b64decode(m.group(2) + "=" * (-len(m.group(2)) % 4), validate=True)
    except (binascii.Error, ValueError):
        return m.group(0)
    return m.group(1) + MASK if b":" in decoded else m.group(0)


def _mixed_base64(m: re.Match[str]) -> str:
    """A 40-character AWS secret: base64 with both cases (a hex digest has one)."""
    value = m.group(0)
    if any(c.isupper() for c in value) and any(c.islower() for c in value):
        return MASK
    return value


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


def _htpasswd(m: re.Match[str]) -> str:
    """``htpasswd`` with ``-b`` takes the password as its last word: the third after the options
    (``FILE USER PW``), the second with ``-n`` (``USER PW``, no file)."""
    flags = "".join(word[1:] for word in m.group(1).split() if word.startswith("-") and not word[1:].isdigit())
    if "b" not in flags:
        return m.group(0)
    words = list(re.finditer(r"\S+", m.group(2)))
    at = 1 if "n" in flags else 2
    if len(words) <= at:
        return m.group(0)
    start, end = words[at].span()
    return m.string[m.start() : m.start(2)] + m.group(2)[:start] + MASK + m.group(2)[end:]


# (family, the client and subcommand, the flag its password follows)
_PASSWORD_FLAGS = [
    ("registry-login-p", r"(?:docker|podman|nerdctl|skopeo|buildah)[ \t]+login", "-p"),
    ("az-login-p", r"az[ \t]+login", "-p"),
    ("mongo-p", r"mongo(?:sh|dump|restore|import|export|stat|top|files)?", "-p"),
    ("redis-cli-a", r"redis-cli", "-a"),
]

Replacement = str | Callable[[re.Match[str]], str]

# Vendor tokens recognisable by their prefix alone (gitleaks' and detect-secrets'
# rules): (family, prefix regex, body class, least body length).
_PREFIXED: list[tuple[str, str, str, int]] = [
    ("huggingface", r"hf_|api_org_", r"A-Za-z0-9", 20),
    ("openai-anthropic", r"sk-(?:proj-|ant-|svcacct-|admin-)?", r"A-Za-z0-9_\-", 16),
    ("stripe", r"[rs]k_(?:live|test|prod)_", r"A-Za-z0-9", 16),
    ("github", r"gh[pousr]_", r"A-Za-z0-9", 20),
    ("github-fine-grained", r"github_pat_", r"A-Za-z0-9_", 20),
    ("gitlab", r"gl(?:pat|dt|ft|rt|ptt|soat|cbt|imt|agent|oas|ffct)-", r"A-Za-z0-9_\-", 20),
    ("slack", r"xox[abposre]-|xapp-", r"A-Za-z0-9\-", 10),
    ("google-api-key", r"AIza", r"0-9A-Za-z_\-", 30),
    ("google-oauth", r"ya29\.", r"0-9A-Za-z_\-", 20),
    ("npm", r"npm_", r"A-Za-z0-9", 30),
    ("pypi", r"pypi-", r"A-Za-z0-9_\-", 40),
    ("groq", r"gsk_", r"A-Za-z0-9", 20),
    ("replicate", r"r8_", r"A-Za-z0-9", 20),
    ("perplexity", r"pplx-", r"A-Za-z0-9", 20),
    ("vault", r"hv[sbr]\.", r"A-Za-z0-9_\-", 20),
    ("digitalocean", r"do[opr]_v1_", r"a-f0-9", 32),
    ("databricks", r"dapi", r"a-f0-9", 32),
    ("shopify", r"shp(?:at|ca|pa|ss)_", r"a-fA-F0-9", 32),
    ("sentry", r"sntr[yu]s?_", r"A-Za-z0-9+/=_", 32),
    ("grafana", r"gl(?:c|sa)_", r"A-Za-z0-9+/_", 32),
    ("linear", r"lin_api_", r"A-Za-z0-9", 32),
    ("notion", r"ntn_|secret_(?=[A-Za-z0-9]{43})", r"A-Za-z0-9", 30),
    ("pulumi", r"pul-", r"a-f0-9", 32),
    ("postman", r"PMAK-", r"A-Za-z0-9\-", 30),
    ("doppler", r"dp\.(?:pt|st|sa|ct)\.", r"A-Za-z0-9", 30),
    ("planetscale", r"pscale_(?:tkn|oauth|pw)_", r"A-Za-z0-9_=.\-", 30),
    ("onepassword", r"ops_eyJ", r"A-Za-z0-9+/=", 50),
    ("age", r"AGE-SECRET-KEY-1", r"A-Z0-9", 50),
    ("artifactory", r"AKCp", r"A-Za-z0-9", 60),
    ("square", r"sq0(?:atp|csp)-|EAAA", r"A-Za-z0-9_\-", 22),
    ("heroku", r"HRKU-AA", r"A-Za-z0-9_\-", 50),
    ("fly", r"fo1_|fm[12][ar]?_", r"A-Za-z0-9_\-+/=", 40),
    ("rubygems", r"rubygems_", r"a-f0-9", 40),
    ("readme", r"rdme_", r"a-z0-9", 40),
    ("prefect", r"pnu_", r"A-Za-z0-9", 30),
    ("sendinblue", r"xkeysib-", r"a-f0-9\-A-Za-z", 40),
    ("dynatrace", r"dt0c01\.", r"A-Za-z0-9.", 40),
    ("openshift", r"sha256~", r"A-Za-z0-9_\-", 40),
    ("twilio", r"SK(?=[0-9a-f]{32})", r"0-9a-f", 32),
]

_PATTERNS: list[tuple[str, re.Pattern[str] | _UrlUserinfo, Replacement]] = [
    # Colour codes first (SGR: ESC [ ... m), raw or as a JSON/C escape (\u001b, \x1b, \033) in a quoted
    # record: one around a key name ("ESC[1mHF_TOKEN ESC[0m=...") or glued before a URL or a token hid
    # it from every row below. They colour, they say nothing: removed. (Other escape sequences are left
    # for the sanitiser to show; a bare \u001b in quoted text is dropped as well.)
    (
        "colour-code",
        re.compile(r"(?:\x1b|\\(?:u001[bB]|x1[bB]|033|e))\[[0-9;:]{0,32}m|\\u001[bB](?!\[)"),
        "",
    ),
    # Private keys (PEM, OpenSSH, PGP): the whole block when it is on one quote, the header line otherwise.
    (
        "private-key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
            r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)"
        ),
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
            r"(?i)((?:proxy-)?authorization[\\\"']{0,2}\s*[:=]\s*[\\\"']{0,2})(?:(?:bearer|basic|token|"
            r"digest|negotiate|apikey|sharedkey)(?:\s|\\[tn])+)?[^\s\"',}\\]+"
        ),
        r"\1" + MASK,
    ),
    # A bare Basic credential ("Basic dXNlcjpwYXNz"), when it decodes to user:password.
    ("basic", re.compile(r"(\bBasic\s+)([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"), _basic),
    # Cookies and API-key headers: the value runs to the end of the header.
    ("cookie-header", re.compile(r"(?i)(\b(?:set-)?cookie[\"']?\s*:\s*)[^\r\n\"']+"), r"\1" + MASK),
    (
        "key-header",
        re.compile(
            r"(?i)(\b(?:x-(?:[a-z0-9]{1,30}-){0,4}(?:api-?key|key|token|secret|auth|signature|credential)|"
            r"ocp-apim-subscription-key|api-?key)[\"']?\s*:\s*[\"']?)[^\s\"',}]+"
        ),
        r"\1" + MASK,
    ),
    # Signed URLs: AWS presigned (X-Amz-Signature, -Credential, -Security-Token), Azure SAS (sig=),
    # Google (X-Goog-Signature): in a URL, a Location header, anywhere.
    (
        "url-signature",
        re.compile(
            r"(?i)([?&;](?:x-amz-(?:signature|credential|security-token)|x-goog-signature|sig|signature)=)"
            r"[^&\s\"'<>#]+"
        ),
        r"\1" + MASK,
    ),
    # Webhook URLs are credentials: Slack, Discord, Microsoft Teams.
    (
        "webhook",
        re.compile(
            r"(?i)(\bhooks\.slack\.com/(?:services|workflows|triggers)/|"
            r"\bdiscord(?:app)?\.com/api/webhooks/|\.webhook\.office\.com/webhookb2/)[^\s\"'<>]+"
        ),
        r"\1" + MASK,
    ),
    # A bare bearer credential anywhere ("Bearer eyJ...").
    # (Tab or newline between them as a JSON escape too: "Bearer\\tey..." in a ledger row's text.)
    ("bearer", re.compile(r"(?i)(\bbearer(?:\s|\\[tn])+)[A-Za-z0-9._~+/=-]{8,}"), r"\1" + MASK),
    # JSON Web Tokens wherever they stand.
    # (Only where a run of token characters begins: "eyJ-" repeated is one candidate, not n.)
    ("jwt", re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}(?:\.[A-Za-z0-9_-]*)?"), MASK),
    # Credentials inside URLs, any scheme case, user:password or a token alone; the
    # password may hold '/' or '@', so the userinfo runs to the token's last '@'.
    # Not one regex: "a://" repeated made the old one quadratic (issue #27).
    ("url-userinfo", _UrlUserinfo(), MASK + "@"),
    # curl -u user:pw, --user=user:pw (any tool): a value with a ':' in it.
    (
        "user-option",
        re.compile(r"((?<![\w-])(?:-u|--user)(?:=|\s+)[\"']?)([^\s:\"']{1,100}:[^\s\"']+)"),
        r"\1" + MASK,
    ),
    # mysql -pPASSWORD (and mysqldump, mysqladmin): the password glued to -p.
    ("mysql-p", re.compile(r"(\bmysql(?:dump|admin)?\b[^\n]{0,200}?\s-p)([^\s\"']+)"), r"\1" + MASK),
    # sshpass -p PASSWORD (or -pPASSWORD); -f FILE and -e (the password elsewhere) show nothing.
    ("sshpass-p", re.compile(r"(\bsshpass\b[^\n]{0,200}?\s-p\s*)([^\s\"']+)"), r"\1" + MASK),
    # A password given to a client's own flag (issue 48): docker/podman/nerdctl/skopeo/buildah and az "login -p PW",
    # the MongoDB shell and tools "-p PW", redis-cli "-a PW" (glued or quoted too). A flag with no value
    # ("-p --authenticationDatabase admin") or one after a shell separator ("docker login r && docker run -p 80:80")
    # shows nothing; "--password PW" is cli-option's.
    *(
        (
            family,
            re.compile(
                r"((?<![\w-])(?:" + tool + r")(?![\w-])[^\n;|&]{0,200}?\s" + flag + r"(?:[ \t]+|=)?[\"']?)(?![-\s\"'])"
                r"([^\s\"']+)"
            ),
            r"\1" + MASK,
        )
        for family, tool, flag in _PASSWORD_FLAGS
    ),
    # Samba: "-U user%PW", "--user=DOMAIN\\user%PW" (smbclient, rpcclient, smbcacls, net ...).
    (
        "samba-user",
        re.compile(r"((?<![\w-])(?:-U|--user(?:name)?)(?:=|[ \t]*)[\"']?[\w.@\\$-]{1,100}%)([^\s\"']+)"),
        r"\1" + MASK,
    ),
    # htpasswd -b (the password on the command line): "htpasswd -b[c] FILE USER PW", "htpasswd -nb USER PW".
    (
        "htpasswd",
        re.compile(r"\bhtpasswd((?:[ \t]+(?:-C[ \t]+\d+|-[A-Za-z]+))*)((?:[ \t]+[^\s|;&<>\"']+){1,3})"),
        _htpasswd,
    ),
    # .netrc: "machine HOST login USER password PW" (one line or several), "default login U password PW";
    # a host or user ending in ':' or ',' is prose ("machine learning login page: password reset").
    (
        "netrc",
        re.compile(r"(?i)(\b(?:machine\s+[^\s:,;]+|default)\s+login\s+[^\s:,;]+\s+password\s+)([^\s\"']+)"),
        r"\1" + MASK,
    ),
    # --hf-token X, --api-key=X, --password X (the last word of the option names the secret).
    (
        "cli-option",
        re.compile(r"(?i)(--(?:[a-z0-9]{1,30}[-_]){0,8}" + _SECRET_NAME + r"(?:=|\s+))(?!-)(" + _VALUE + r")"),
        _masking(),
    ),
    # "password": "x", 'token': 'x', \"api_key\": \"x\" (JSON, escaped JSON, Python reprs, YAML flow).
    (
        "quoted-field",
        re.compile(
            r"(?i)((?:" + _SECRET_NAME + r"|(?<=[\"'])auth|_auth|pass)\\{0,3}[\"']\s*:\s*\\{0,3}[\"'])([^\"'\\]*)"
        ),
        _masking(),
    ),
    # NAME_API_KEY=value, HF_TOKEN: value, DB_PASS=x, passwd=x, _auth=x, AWS_SECRET_ACCESS_KEY=x ...
    # (Matched from the secret word on, so the name's prefix costs nothing to skip.)
    (
        "env-assignment",
        re.compile(r"(?i)(" + _SECRET_NAME + r"\b[\"']?\s*[=:]\s*[\"']?)(?![\s\"'])(" + _VALUE + r")"),
        _masking(),
    ),
    # AWS: key ids, and a 40-character secret beside one (the secret has no name before it).
    (
        "aws-access-key-id",
        re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),
        MASK,
    ),
    ("aws-secret-beside-id", re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"), _mixed_base64),
    # SendGrid, Telegram bot tokens, Azure AD client secrets: shapes without a plain prefix.
    ("sendgrid", re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"), MASK),
    ("telegram-bot", re.compile(r"(?<![\w:])\d{6,12}:AA[A-Za-z0-9_\-]{30,}"), MASK),
    ("azure-ad-client-secret", re.compile(r"(?<![\w~.])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}"), MASK),
    # Vendor token formats, recognisable by their prefix.
    *(
        (family, re.compile(r"(?<![A-Za-z0-9_\-])(?:" + prefix + r")[" + body + r"]{" + str(least) + r",}"), MASK)
        for family, prefix, body, least in _PREFIXED
    ),
    # W&B keys: 40 hex characters (optionally local-) after "wandb login" or a key word in a
    # wandb line (the env form is env-assignment's); a 40-hex commit in a wandb line is not a key.
    (
        "wandb",
        re.compile(
            r"(?i)(\bwandb\b[^\n]{0,40}?\b(?:login|key|api[_ -]?key)\b[:=]?\s+(?:--?[a-z-]+\s+){0,3}[\"']?)"
            r"(?:local-)?[0-9a-f]{40}\b"
        ),
        r"\1" + MASK,
    ),
]


# One of these (lower case) is in every match of _SECRET_NAME.
_SECRET_WORDS = ("key", "secret", "passw", "passphrase", "pwd", "pass", "token", "credential", "auth")

# Per family, literals that every match contains, case-folded. A row runs only on
# text whose case-folded form holds one of them (casefold, not lower: it equates
# what re.IGNORECASE does, "ſ" and "s"); a family not listed always runs. Most
# quoted text holds no secret: the whole table costs ~300 µs per 200 characters,
# the triggers ~20 µs (measured). Replacements only remove text, so triggers
# read before the first row stay valid for the last.
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "private-key": ("-----begin",),
    "pem-body": (),
    "authorization": ("authorization",),
    "basic": ("basic",),
    "cookie-header": ("cookie",),
    "key-header": ("x-", "ocp-apim", "api-key", "apikey"),
    "url-signature": ("sig", "x-amz-"),
    "webhook": ("hooks.slack.com", "discord", "webhook.office.com"),
    "bearer": ("bearer",),
    "jwt": ("eyj",),
    "url-userinfo": ("://",),
    "user-option": ("-u",),
    "mysql-p": ("mysql",),
    "sshpass-p": ("sshpass",),
    "registry-login-p": ("login",),
    "az-login-p": ("login",),
    "mongo-p": ("mongo",),
    "redis-cli-a": ("redis-cli",),
    "samba-user": ("%",),
    "htpasswd": ("htpasswd",),
    "netrc": ("login",),
    "cli-option": ("--",),
    "quoted-field": _SECRET_WORDS,
    "env-assignment": _SECRET_WORDS,
    "aws-access-key-id": ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa", "abia", "acca", "a3t"),
    "aws-secret-beside-id": ("akia", "asia", "aws"),
    "sendgrid": ("sg.",),
    "telegram-bot": (":aa",),
    "azure-ad-client-secret": ("q~",),
    "huggingface": ("hf_", "api_org_"),
    "openai-anthropic": ("sk-",),
    "stripe": ("k_live_", "k_test_", "k_prod_"),
    "github": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "github-fine-grained": ("github_pat_",),
    "gitlab": ("gl",),
    "slack": ("xox", "xapp-"),
    "google-api-key": ("aiza",),
    "google-oauth": ("ya29.",),
    "npm": ("npm_",),
    "pypi": ("pypi-",),
    "groq": ("gsk_",),
    "replicate": ("r8_",),
    "perplexity": ("pplx-",),
    "vault": ("hvs.", "hvb.", "hvr."),
    "digitalocean": ("_v1_",),
    "databricks": ("dapi",),
    "shopify": ("shp",),
    "sentry": ("sntr",),
    "grafana": ("glc_", "glsa_"),
    "linear": ("lin_api_",),
    "notion": ("ntn_", "secret_"),
    "pulumi": ("pul-",),
    "postman": ("pmak-",),
    "doppler": ("dp.",),
    "planetscale": ("pscale_",),
    "onepassword": ("ops_eyj",),
    "age": ("age-secret-key-1",),
    "artifactory": ("akcp",),
    "square": ("sq0", "eaaa"),
    "heroku": ("hrku-aa",),
    "fly": ("fo1_", "fm1", "fm2"),
    "rubygems": ("rubygems_",),
    "readme": ("rdme_",),
    "prefect": ("pnu_",),
    "sendinblue": ("xkeysib-",),
    "dynatrace": ("dt0c01.",),
    "openshift": ("sha256~",),
    "twilio": ("sk",),
    "wandb": ("wandb",),
}
# Colour codes go before the triggers are read (removing one can join a name: "TO<ESC>[0mKEN").
_COLOUR = _PATTERNS[0][1]
_ROWS = [(pattern, replacement, _TRIGGERS.get(family, ())) for family, pattern, replacement in _PATTERNS[1:]]
_ALL_TRIGGERS = tuple(sorted({t for triggers in _TRIGGERS.values() for t in triggers}))


def _presence(words: tuple[str, ...]) -> re.Pattern[str]:
    """A regex that finds any of ``words``, as a trie (``s(?:ecret|k|q0…)|…``): a plain alternation of ~100
    literals tries each at every position (~56 µs per 150 characters, most of a big sweep's quoting time),
    this one a branch per first character (~13 µs). A word holding another (``sk-`` holds ``sk``) is left out:
    the shorter one is found wherever the longer is, so no word left is a prefix of another."""
    kept = sorted({w for w in words if not any(o != w and o in w for o in words)})
    trie: dict[str, dict] = {}
    for word in kept:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})

    def branch(node: dict[str, dict]) -> str:
        alts = [re.escape(ch) + branch(child) for ch, child in sorted(node.items())]
        return "" if not alts else alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return re.compile(branch(trie))


# One search says whether any trigger is there at all (most shown strings hold none).
_ANY_TRIGGER = _presence(_ALL_TRIGGERS)
_UNTRIGGERED = [(pattern, replacement) for pattern, replacement, triggers in _ROWS if not triggers]


def redact(text: str) -> str:
    if not text:
        return text
    if "\x1b" in text or "\\" in text:
        text = _COLOUR.sub("", text)  # type: ignore[arg-type]
    folded = text.casefold()
    if _ANY_TRIGGER.search(folded) is None:
        if len(text) >= 40:  # the rows without a trigger look for 40-character runs
            for pattern, replacement in _UNTRIGGERED:
                text = pattern.sub(replacement, text)  # type: ignore[arg-type]
        return text
    present = {t for t in _ALL_TRIGGERS if t in folded}
    for pattern, replacement, triggers in _ROWS:
        if not triggers or not present.isdisjoint(triggers):
            text = pattern.sub(replacement, text)  # type: ignore[arg-type]
    return text
