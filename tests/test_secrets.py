"""Secrets planted in ledgers and logs never reach the terminal, the JUnit XML
or the JSON report, whichever check quotes them."""

from __future__ import annotations

import pytest

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
    from pytest_runhealth.safety.redact import redact

    assert len(CORPUS) >= 40
    for line, secret in CORPUS:
        assert secret not in redact(line), line
    for line in KEPT:
        assert redact(line) == line


def _every_output(pytester, run_health, lines: list[str], ledger: str = "") -> dict[str, str]:
    """A sweep whose run's log holds ``lines`` (quoted by the check above) and whose ledger holds
    ``ledger`` after its one good row: the terminal, JUnit, HTML, Markdown and JSON it gives."""
    pytester.makeconftest(QUOTING_CHECK)
    session = pytester.path / "session"
    logs = session / "runs" / "r1" / "logs"
    logs.mkdir(parents=True)
    (logs / "stdout.log").write_text("\n".join(lines) + "\n")
    (session / "ledger.jsonl").write_text('{"run_id": "r1", "n_steps": 3}\n' + ledger)
    xml, html, md = pytester.path / "junit.xml", pytester.path / "r.html", pytester.path / "r.md"
    res = run_health(
        session, args=("--junitxml", str(xml), "--runhealth-html", str(html), "--runhealth-markdown", str(md), "-rA")
    )
    assert res.outcome("SEC001", "r1") == "failed", res.stdout[-3000:]
    return {
        "terminal": res.stdout,
        "junit": xml.read_text(),
        "html": html.read_text(),
        "markdown": md.read_text(),
        "json": (pytester.path / "runhealth-report.json").read_text(),
    }


def test_every_planted_form_is_redacted_in_every_output(pytester, run_health):
    outputs = _every_output(pytester, run_health, [line for line, _ in CORPUS[-40:]])
    leaks = [(where, secret) for where, text in outputs.items() for _, secret in CORPUS[-40:] if secret in text]
    assert leaks == []


def test_digests_and_ids_survive_redaction():
    from pytest_runhealth.safety.redact import redact

    for kept in ("3f" * 32, "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", "0123456789abcdef" * 4):
        assert redact(kept) == kept


def test_the_trigger_filter_changes_no_redaction():
    """redact() runs a row only where one of its trigger literals occurs; on
    every planted form, near miss and case variant, the result is the one the
    whole table gives."""
    from pytest_runhealth.safety import redact as r

    def unfiltered(text: str) -> str:
        for _family, pattern, replacement in r._PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    lines = [line for line, _ in CORPUS] + KEPT
    lines += [variant for line in lines for variant in (line.upper(), line.swapcase(), "x " + line + " y")]
    lines.append("PAſſWORD=plantedsecret99 and Kelvin-sign Token=plantedsecret98")
    for line in lines:
        assert r.redact(line) == unfiltered(line), line


def test_the_trigger_search_finds_exactly_the_triggers():
    """redact()'s one search for any trigger (a trie of the literals) finds one exactly where a trigger occurs:
    each trigger alone, cut short, inside other text, and random strings over the triggers' alphabet."""
    import random

    from pytest_runhealth.safety import redact as r

    words = r._ALL_TRIGGERS
    alphabet = sorted({ch for w in words for ch in w} | set("xyz "))
    rng = random.Random(38)
    texts = [w for w in words] + [w[:-1] for w in words] + [f"ab{w}cd" for w in words]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        cut = rng.randint(0, len(text))
        texts.append(text[:cut] + rng.choice(words)[: rng.randint(1, 6)] + text[cut:])
    for text in texts:
        assert (r._ANY_TRIGGER.search(text) is not None) == any(w in text for w in words), text


# -- issue #27 item 4: the forms that leaked, and the look-alikes that must survive ----------------
# The forms follow the rule sets of gitleaks (config/gitleaks.toml) and detect-secrets
# (detect_secrets/plugins): https://github.com/gitleaks/gitleaks, https://github.com/Yelp/detect-secrets
NEW_FORMS = [  # (line, the part that must never be shown)
    ("aws-pair AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYplnt000001", "bPxRfiCYplnt000001"),
    ("GET /b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=9f8e7d6c5b4aplnt0002&X-Amz-Date=1", "plnt0002"),
    ("header Basic YWxpY2U6cGxudDAwMDM=", "YWxpY2U6cGxudDAwMDM="),
    ("curl -u alice:plnt0004pw https://api.example/x", "plnt0004pw"),
    ("mysql -h db -u root -pplnt0005pw mydb", "plnt0005pw"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK----- lQOYBGplnt0006 -----END PGP PRIVATE KEY BLOCK-----", "lQOYBGplnt0006"),
    ("post https://hooks.slack.com/services/T0000/B0000/plnt0007abcdefgh", "plnt0007abcdefgh"),
    ("post https://discord.com/api/webhooks/123456/plnt0008abcdefgh", "plnt0008abcdefgh"),
    ("app token xapp-1-A0123-4567-plnt0009abcdef", "plnt0009abcdef"),
    ("DB_PASS=plnt0010", "plnt0010"),
    ("OPENROUTER_KEY=plnt0011abcdef", "plnt0011abcdef"),
    ("REGISTRY_AUTH=plnt0012abcdef", "plnt0012abcdef"),
    ('msg "{\\"api_key\\": \\"plnt0013abcdef\\"}"', "plnt0013abcdef"),
    ('{"pwd": "plnt0014"}', "plnt0014"),
    ('{"passphrase": "plnt0015 words"}', "plnt0015"),
    ('{"auths": {"r.example": {"auth": "cGxudDAwMTY6eHl6"}}}', "cGxudDAwMTY6eHl6"),
    ("//registry.npmjs.org/:_auth=cGxudDAwMTc6eHl6", "cGxudDAwMTc6eHl6"),
    ("https://acct.blob.core.windows.net/c/b?sv=2022-11-02&ss=b&sig=plnt0018abc%2Bdef%3D", "plnt0018abc"),
    ("Ocp-Apim-Subscription-Key: plnt0019abcdef", "plnt0019abcdef"),
    ("groq gsk_plnt0020abcdefghijklmnopqrstuv", "plnt0020abcdefghij"),
    ("replicate r8_plnt0021abcdefghijklmnopqrstuv", "plnt0021abcdefghij"),
    ("sendgrid SG.plnt0022abcdefghijkl.mnopqrstuvwxyz0123456789", "plnt0022abcdefghijkl"),
    ("vault hvs.plnt0023abcdefghijklmnopqrstuvwxyz", "plnt0023abcdefghij"),
    ("bot 1234567890:AAplnt0024abcdefghijklmnopqrstuvwxyz_-", "AAplnt0024abcdefghij"),
    ("do dop_v1_" + "ab12" * 16, "ab12ab12ab12ab12ab12"),
    ("Location: https://s.example/file?se=2030&sp=r&sig=plnt0026xyz", "plnt0026xyz"),
]
HARMLESS = [  # shown exactly as written
    "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    "wandb: git commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    "eos_token: </s>",
    "python train.py --pad-token 0",
    "credentials: loaded from ~/.aws/credentials",
    "s3://bucket/data/token=abc/part-0000.parquet",
    "python -u train.py --lr 1e-4",
    "tokenizer: gpt2, num_tokens: 4096, pad_token_id: 0",
    "Basic training finished",
    "sort_key=name primary_key: id",
]


def test_the_forms_that_leaked_are_redacted_and_the_look_alikes_are_not():
    from pytest_runhealth.safety.redact import redact

    leaks = [line for line, secret in NEW_FORMS if secret in redact(line)]
    assert leaks == []
    changed = [(line, redact(line)) for line in HARMLESS if redact(line) != line]
    assert changed == []


def test_redaction_is_idempotent_and_the_trigger_filter_changes_nothing_on_the_new_forms():
    from pytest_runhealth.safety import redact as r

    def unfiltered(text: str) -> str:
        for _family, pattern, replacement in r._PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    for line in [line for line, _ in NEW_FORMS] + HARMLESS:
        for variant in (line, line.upper(), line.swapcase()):
            once = r.redact(variant)
            assert once == unfiltered(variant), variant
            assert r.redact(once) == once, variant


def test_every_writer_ends_in_the_one_sanitiser():
    """HTML (the rounds table's "not counted: ..." included), Markdown, the JSON
    report's sections, the terminal summary and the watch/notify lines."""
    import io
    import json as jsonlib

    from pytest_runhealth.model.results import write_json
    from pytest_runhealth.plugins.printable import ShownTerminal
    from pytest_runhealth.reports import html, markdown

    secret_line, secret = NEW_FORMS[17]  # an Azure SAS sig=
    row = {"round": "r1", "source": "s", "status": "done", "episodes": 2, "scores": "", "counted": False}
    page = html.render_rounds([{**row, "why": f"episode log says {secret_line}"}])
    assert "not counted" in page and secret not in page
    assert secret not in markdown.cell(secret_line)

    class Recorder:
        lines: list[str] = []

        def write_line(self, line, **markup):
            self.lines.append(line)

        def write_sep(self, sep, title=None, **markup):
            self.lines.append(title)

    rec = Recorder()
    tr = ShownTerminal(rec)
    tr.write_sep("-", "run-health: root causes")
    tr.write_line("run \x1b]0;pwned\x07 " + secret_line)
    assert all(secret not in line and "\x1b" not in line and "\x07" not in line for line in rec.lines), rec.lines

    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.json"
        write_json(path, {"results": [], "status": {"r1": {"error": secret_line}}})
        assert secret not in path.read_text() and jsonlib.loads(path.read_text())["status"]["r1"]["error"]

    from types import SimpleNamespace

    from pytest_runhealth.watch.loop import Watch

    fake = SimpleNamespace(out=io.StringIO(), unsent=[])
    Watch.say(fake, "run-1\n[12:00:00] stopping: all checks passed " + secret_line + "\x1b[2J\x9b")
    printed = fake.out.getvalue()
    assert printed.count("\n") == 1 and secret not in printed and "\x1b" not in printed and "\x9b" not in printed
    assert fake.unsent and secret not in fake.unsent[0]


# -- issue 36: forms that hid behind colour codes, JSON escapes and other tools' syntax -----------------
# A ledger row's text is JSON: a tab, ESC or quote inside a value is written \t, \u001b, \" there.
ROUND4_FORMS = [  # (line, the part that must never be shown)
    ("\x1b[1mHF_TOKEN\x1b[0m=plnt3601abcdefgh", "plnt3601abcdefgh"),
    ("\x1b[1mOPENAI_API_KEY\x1b[0m: plnt3602abcdefgh", "plnt3602abcdefgh"),
    ("clone \x1b[32mhttps://bob:plnt3603pw@git.example.com/r.git\x1b[0m", "plnt3603pw"),
    ("push \x1b[0mhttps://bob:plnt3604pw@git.example.com/r.git", "plnt3604pw"),
    ('{"error": "WANDB_API_KEY\\u001b[0m=plnt3605abcdefgh"}', "plnt3605abcdefgh"),
    ('{"error": "api_key\\u001b=plnt3606abcdefgh"}', "plnt3606abcdefgh"),
    ('{"error": "{\\"api_key\\": \\"plnt3607abcdefgh\\"}"}', "plnt3607abcdefgh"),
    ('{"error": "{\\\\\\"api_key\\\\\\": \\\\\\"plnt3608abcdefgh\\\\\\"}"}', "plnt3608abcdefgh"),
    ("Authorization:\tBearer\tplnt3609abcdefgh", "plnt3609abcdefgh"),
    ("header Bearer\tplnt3610abcdefgh", "plnt3610abcdefgh"),
    ('{"error": "got 401 for Bearer\\tplnt3611abcdefgh"}', "plnt3611abcdefgh"),
    ("rsync -e 'sshpass -p plnt3612pw ssh -o StrictHostKeyChecking=no' src/ host:dst/", "plnt3612pw"),
    ("sshpass -pplnt3613pw scp model.bin host:/data", "plnt3613pw"),
    ("machine hub.example.com login alice password plnt3614pw", "plnt3614pw"),
    ("default login anonymous password plnt3615pw", "plnt3615pw"),
    ("DIGITALOCEAN_TOKEN=dop_v1_" + "c0ffee12" * 8, "c0ffee12c0ffee12"),
    ("token \x1b[33mdop_v1_" + "deadbeef" * 8, "deadbeefdeadbeef"),
    ("doctl auth init -t dor_v1_" + "0a1b2c3d" * 8, "0a1b2c3d0a1b2c3d"),
]
ROUND4_HARMLESS = [  # look-alikes of those forms, shown exactly as written
    "sshpass -f /run/secrets/ssh_pw ssh host uptime",
    "machine learning login page: password reset sent",
    "Bearer\ttokens are checked by the proxy",
    "do_v1_migration finished in 3.2s",
    '{"note": "api_key\\u0020rotation is due", "tokenizer": "gpt2"}',
]


def test_round_four_forms_are_redacted_and_their_look_alikes_are_not():
    from pytest_runhealth.safety import redact as r

    def unfiltered(text: str) -> str:
        for _family, pattern, replacement in r._PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    leaks = [line for line, secret in ROUND4_FORMS if secret in r.redact(line)]
    assert leaks == []
    changed = [(line, r.redact(line)) for line in ROUND4_HARMLESS if r.redact(line) != line]
    assert changed == []
    for line in [line for line, _ in ROUND4_FORMS] + ROUND4_HARMLESS:
        once = r.redact(line)
        assert once == unfiltered(line), line
        assert r.redact(once) == once, line


def test_round_four_forms_are_redacted_in_every_output(pytester, run_health):
    """End to end: quoted from a log (the check above) and from the ledger (RH001 quotes a bad row's
    text), shown by the terminal, JUnit, the JSON report, HTML and Markdown."""
    ledger_rows = "".join(
        line.replace("}", ', "run_id": 7}', 1) + "\n" for line, _ in ROUND4_FORMS if line.startswith("{")
    )
    outputs = _every_output(pytester, run_health, [line for line, _ in ROUND4_FORMS], ledger_rows)
    leaks = [(where, secret) for where, text in outputs.items() for _, secret in ROUND4_FORMS if secret in text]
    assert leaks == []
    assert outputs["terminal"].count("[REDACTED]") >= len(ROUND4_FORMS)


@pytest.mark.parametrize(
    "secret",
    [
        "WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567",
        "wandb: key 0123456789abcdef0123456789abcdef01234567",
        "token hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx",
        "Authorization: Bearer abc.def.ghi",
        '"authorization": "Bearer lmstudio-xyz"',
        "LM_API_TOKEN=sekrit-value",
        "https://user:hunter2@example.com/repo.git",
    ],
)
def test_redaction(secret):
    from pytest_runhealth.safety.redact import redact

    out = redact(f"before {secret} after")
    for token in (
        "0123456789abcdef0123456789abcdef01234567",
        "hf_AbCdEf",
        "sk-proj-abc",
        "abc.def.ghi",
        "lmstudio-xyz",
        "sekrit-value",
        "hunter2",
    ):
        assert token not in out
    assert out.startswith("before") and out.endswith("after")


# -- issue 48 item 12: passwords given to a client's own flag -------------------------------------------------
ROUND5_FORMS = [  # (line, the part that must never be shown)
    ("docker login -u bob -p plnt4801pw registry.example.com", "plnt4801pw"),
    ("docker login -pplnt4802pw r.example.com", "plnt4802pw"),
    ('podman login -u bob -p "plnt4803pw" quay.io', "plnt4803pw"),
    ("skopeo login -u bob -p plnt4804pw quay.io", "plnt4804pw"),
    ("az login -u alice@example.com -p plnt4805pw", "plnt4805pw"),
    ("mongo -u admin -p plnt4806pw --authenticationDatabase admin", "plnt4806pw"),
    ('mongosh "mongodb://db:27017" -u app -p plnt4807pw', "plnt4807pw"),
    ("mongodump --host db -u backup -p=plnt4808pw --out /data", "plnt4808pw"),
    ("redis-cli -h cache -a plnt4809pw ping", "plnt4809pw"),
    ("redis-cli --no-auth-warning -a 'plnt4810pw' INFO", "plnt4810pw"),
    ("smbclient //srv/share -U alice%plnt4811pw -c ls", "plnt4811pw"),
    ('smbclient -U "CORP\\alice%plnt4812pw" //srv/share', "plnt4812pw"),
    ("rpcclient --user=alice%plnt4813pw srv", "plnt4813pw"),
    ("htpasswd -b .htpasswd alice plnt4814pw", "plnt4814pw"),
    ("htpasswd -bc /etc/nginx/.htpasswd alice plnt4815pw", "plnt4815pw"),
    ("htpasswd -nb alice plnt4816pw > users", "plnt4816pw"),
    ("htpasswd -B -C 10 -b users alice plnt4817pw", "plnt4817pw"),
]
ROUND5_HARMLESS = [  # look-alikes of those forms, shown exactly as written
    "docker run -p 8080:80 nginx",
    "docker login -u bob --password-stdin registry.example.com",
    "docker login registry.example.com && docker run -p 8080:80 nginx",
    "az vm create -n vm1 -p 22",
    "mongo -u admin -p --authenticationDatabase admin",
    "mongo-express -p 8081",
    "redis-cli -h cache -p 6379 ping",
    "smbclient -U alice //srv/share",
    "date -U +%Y%m%d",
    "htpasswd -c .htpasswd alice",
    "htpasswd -nB alice",
]


def test_round_five_forms_are_redacted_and_their_look_alikes_are_not():
    from pytest_runhealth.safety import redact as r

    def unfiltered(text: str) -> str:
        for _family, pattern, replacement in r._PATTERNS:
            text = pattern.sub(replacement, text)
        return text

    leaks = [(line, r.redact(line)) for line, secret in ROUND5_FORMS if secret in r.redact(line)]
    assert leaks == []
    changed = [(line, r.redact(line)) for line in ROUND5_HARMLESS if r.redact(line) != line]
    assert changed == []
    for line in [line for line, _ in ROUND5_FORMS] + ROUND5_HARMLESS:
        once = r.redact(line)
        assert once == unfiltered(line), line
        assert r.redact(once) == once, line


def test_round_five_forms_are_redacted_in_every_output(pytester, run_health):
    """End to end: quoted from a log and from a bad ledger row (``docker login -p`` reached all five
    outputs), shown by the terminal, JUnit, the JSON report, HTML and Markdown."""
    ledger_rows = '{"run_id": 7, "error": "docker login -u bob -p plnt4899pw r.example.com"}\n'
    outputs = _every_output(pytester, run_health, [line for line, _ in ROUND5_FORMS], ledger_rows)
    secrets = [secret for _, secret in ROUND5_FORMS] + ["plnt4899pw"]
    leaks = [(where, secret) for where, text in outputs.items() for secret in secrets if secret in text]
    assert leaks == []
    assert all("docker login" in text for text in outputs.values()), "the quoted line is shown, masked"
