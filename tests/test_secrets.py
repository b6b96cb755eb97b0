"""Secrets planted in ledgers and logs never reach the terminal, the JUnit XML
or the JSON report, whichever check quotes them."""

from __future__ import annotations

SECRETS = {
    "wandb": "WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567",
    "hf": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123",
    "openai": "sk-proj-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2",
    "auth": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.secretpayload",
    "apikey": "ANTHROPIC_API_KEY=plantedkeyvalue123",
    "token": "LM_API_TOKEN=plantedtokenvalue456",
    "url": "https://alice:plantedpassw0rd@git.example.com/repo",
}
NEEDLES = [
    "0123456789abcdef0123456789abcdef01234567",
    "hf_AbCdEfGhIjKlMnOp",
    "sk-proj-Zz9Yy8",
    "secretpayload",
    "plantedkeyvalue123",
    "plantedtokenvalue456",
    "plantedpassw0rd",
]

QUOTING_CHECK = """
import pytest_runhealth as rh

@rh.check("SEC001", "quotes-log", needs=["logs"], detects="d", why="w", fix="f")
def quotes(ctx):
    tail = ctx.log_tail()
    return ctx.fail("infra", "unknown", "quoting: " + " | ".join(l.text for l in tail.lines),
                    [ctx.evidence(tail.path, l.line, l.text) for l in tail.lines])
"""


def test_planted_secrets_are_redacted_everywhere(pytester, tmp_path, run_health):
    pytester.makeconftest(QUOTING_CHECK)
    session = tmp_path / "session"
    logs = session / "runs" / "r1" / "logs"
    logs.mkdir(parents=True)
    (logs / "stdout.log").write_text("\n".join(f"env {s}" for s in SECRETS.values()) + "\n")
    ledger_line = '{"run_id": "r1", "error": "%s", "config": {"note": "%s"}}' % (SECRETS["hf"], SECRETS["openai"])
    (session / "ledger.jsonl").write_text(ledger_line + "\n" + '{"run_id": "r2", "error": "%s' % SECRETS["wandb"])
    xml = pytester.path / "junit.xml"
    res = run_health(session, args=("--junitxml", str(xml), "-rA"))
    assert res.outcome("SEC001", "r1") == "failed"
    assert res.result_of("RH001")["outcome"] == "failed"
    outputs = {
        "terminal": res.stdout,
        "junit": xml.read_text(),
        "json": (pytester.path / "runhealth-report.json").read_text(),
    }
    for where, text in outputs.items():
        for needle in NEEDLES:
            assert needle not in text, f"{needle} leaked into the {where} output"
    assert "[REDACTED]" in outputs["json"]


# -- the planted-secrets corpus (#14 item 4): every form, every output ------------------------------
# (line as it would appear in a log, the part that must never be shown)
CORPUS = [
    ("https://alice:plantedpw01@git.example.com/repo", "plantedpw01"),
    ("HTTPS://bob:plantedpw02@host.example/x", "plantedpw02"),
    ("git clone https://carol:pl/anted@pw03@host.example/repo.git", "anted@pw03"),
    ("remote https://dave:pl@nted/pw04@host.example", "nted/pw04"),
    ("fetching https://plantedtoken05abcdef@host.example/x", "plantedtoken05abcdef"),
    ("--eval-server HTTP://bob:plantedpw06@eval.example:8080", "plantedpw06"),
    ("DATABASE_URL=postgres://app:plantedpw07@db.example:5432/x", "plantedpw07"),
    ("AWS_ACCESS_KEY_ID=AKIAPLANTED000000008", "AKIAPLANTED000000008"),
    ("key id AKIAIOSFODNN7PLANT09 in use", "AKIAIOSFODNN7PLANT09"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYplanted10", "bPxRfiCYplanted10"),
    ('aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/plantedsecret11"', "plantedsecret11"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMiJ9.plantedsig12", "plantedsig12"),
    ("sending Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.plantedsig13 upstream", "plantedsig13"),
    ("jwt=eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.plantedsig14", "plantedsig14"),
    ('{"token": "plantedtoken15"}', "plantedtoken15"),
    ('{"secret": "plantedsecret16", "x": 1}', "plantedsecret16"),
    ('{"password": "plantedpw17"}', "plantedpw17"),
    ("{'api_key': 'plantedkey18'}", "plantedkey18"),
    ("python train.py --hf-token plantedtoken19 --lr 1e-4", "plantedtoken19"),
    ("python train.py --api-key=plantedkey20", "plantedkey20"),
    ("login --password plantedpw21", "plantedpw21"),
    ("GITHUB_PAT github_pat_11ABCDEFG0plantedtoken22_abcdefghijklmnop", "plantedtoken22"),
    ("token ghp_plantedtoken23abcdefghijklmnopqrstuv", "plantedtoken23"),
    ("slack xoxb-123456789012-1234567890123-plantedtoken24", "plantedtoken24"),
    ("webhook xoxp-123456789012-plantedtoken25abc", "plantedtoken25"),
    ("-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN RSA PRIVATE KEY-----"),
    ("MIIEpAIBAAKCAQEAplantedpemline27abcdefghijklmnopqrstuvwxyz0123", "plantedpemline27"),
    (
        "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAplanted28 -----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAplanted28",
    ),
    ("maps key AIzaSyplanted29abcdefghijklmnopqrstuvwx", "AIzaSyplanted29"),
    ("X-Api-Key: plantedkey30", "plantedkey30"),
    ('headers {"X-API-KEY": "plantedkey31"}', "plantedkey31"),
    ("Cookie: session=plantedcookie32; theme=dark", "plantedcookie32"),
    ("Set-Cookie: sid=plantedcookie33; HttpOnly", "plantedcookie33"),
    ("passwd=plantedpw34", "plantedpw34"),
    ("DB_PWD=plantedpw35", "plantedpw35"),
    ("MYSQL_ROOT_PWD: plantedpw36", "plantedpw36"),
    ("WANDB_API_KEY=0123456789abcdef0123456789abcdef01234537", "0123456789abcdef0123456789abcdef01234537"),
    ("HF_TOKEN=hf_plantedtoken38ABCDEFGHIJKLMNOP", "plantedtoken38"),
    ("OPENAI_API_KEY=sk-proj-plantedkey39ABCDEFGH", "plantedkey39"),
    ("using sk-ant-api03-plantedkey40ABCDEFGHIJ", "plantedkey40"),
    ("Proxy-Authorization: Basic cGxhbnRlZHB3NDE6eA==", "cGxhbnRlZHB3NDE6eA=="),
    ("stripe sk_live_plantedkey42ABCDEFGH", "plantedkey42"),
    ("gitlab glpat-plantedtoken43ABCDEFG", "plantedtoken43"),
    ("oauth ya29.plantedtoken44ABCDEFGHIJKLMNOP", "plantedtoken44"),
    ("AccountKey=plantedkey45/abc+def==;EndpointSuffix=core.windows.net", "plantedkey45"),
    ("client_secret=plantedsecret46", "plantedsecret46"),
    ("npm_plantedtoken47abcdefghijklmnopqrstuvwxyz", "plantedtoken47"),
    ("export LM_API_TOKEN=plantedtoken48", "plantedtoken48"),
]
# Near misses: ordinary training output that must survive redaction as it was.
KEPT = [
    "step 100/1000 loss=0.512 lr=1e-4 max_new_tokens=256",
    "tokenizer: gpt2, num_tokens: 4096",
    "https://huggingface.co/meta-llama/Llama-3-8B",
    "saving model_weights_step_01200.safetensors",
    "python train.py --max-new-tokens 256 --key-file cfg.yaml",
]


def test_redaction_table_covers_every_planted_form():
    from pytest_runhealth.redact import redact

    assert len(CORPUS) >= 40
    for line, secret in CORPUS:
        assert secret not in redact(line), line
    for line in KEPT:
        assert redact(line) == line


def test_every_planted_form_is_redacted_in_every_output(pytester, tmp_path, run_health):
    pytester.makeconftest(QUOTING_CHECK)
    session = tmp_path / "session"
    logs = session / "runs" / "r1" / "logs"
    logs.mkdir(parents=True)
    (logs / "stdout.log").write_text("\n".join(line for line, _ in CORPUS[-40:]) + "\n")
    (session / "ledger.jsonl").write_text('{"run_id": "r1", "n_steps": 3}\n')
    xml, html, md = pytester.path / "junit.xml", pytester.path / "r.html", pytester.path / "r.md"
    res = run_health(
        session, args=("--junitxml", str(xml), "--runhealth-html", str(html), "--runhealth-markdown", str(md), "-rA")
    )
    assert res.outcome("SEC001", "r1") == "failed", res.stdout[-3000:]
    outputs = {
        "terminal": res.stdout,
        "junit": xml.read_text(),
        "html": html.read_text(),
        "markdown": md.read_text(),
        "json": (pytester.path / "runhealth-report.json").read_text(),
    }
    leaks = [(where, secret) for where, text in outputs.items() for _, secret in CORPUS[-40:] if secret in text]
    assert leaks == []


def test_digests_and_ids_survive_redaction():
    from pytest_runhealth.redact import redact

    for kept in ("3f" * 32, "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", "0123456789abcdef" * 4):
        assert redact(kept) == kept


def test_the_trigger_filter_changes_no_redaction():
    """redact() runs a row only where one of its trigger literals occurs; on
    every planted form, near miss and case variant, the result is the one the
    whole table gives."""
    from pytest_runhealth import redact as r

    def unfiltered(text: str) -> str:
        for _family, pattern, replacement in r._PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    lines = [line for line, _ in CORPUS] + KEPT
    lines += [variant for line in lines for variant in (line.upper(), line.swapcase(), "x " + line + " y")]
    lines.append("PAſſWORD=plantedsecret99 and Kelvin-sign Token=plantedsecret98")
    for line in lines:
        assert r.redact(line) == unfiltered(line), line
