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
NEEDLES = ["0123456789abcdef0123456789abcdef01234567", "hf_AbCdEfGhIjKlMnOp", "sk-proj-Zz9Yy8",
           "secretpayload", "plantedkeyvalue123", "plantedtokenvalue456", "plantedpassw0rd"]

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
