"""RH407's reading of the LM Studio server log (issue 13): each server error in
LM Studio's own words (from lmstudio-ai issues and the issue text), and the look-alikes
that are normal serving."""

from __future__ import annotations

import pytest

from pytest_runhealth.live.lmstudio_log import read_server_log

ERRORS = {
    # lmstudio-ai/lmstudio-bug-tracker#546
    "context-overflow": "2025-03-24 18:30:59 [ERROR]\nTrying to keep the first 111490 tokens when context the overflows. "
    "However, the model is loaded with context length of only 32768 tokens, which is not enough.\n",
    # n4ze3m/page-assist#356 quotes a build without "the"
    "context-overflow-no-the": "[2025-02-08 10:00:00][ERROR] Trying to keep the first 6547 tokens when context overflows. "
    "However, the model is loaded with a context length of only 4096 tokens\n",
    # lmstudio-ai/lmstudio-bug-tracker#2205: LM Studio 0.4's wording (issue 35)
    "context-overflow-tokens-to-keep": "2026-07-25 00:56:33 [ERROR]\n [gemma-4-12b-it-qat] The number of tokens to keep "
    "from the initial prompt is greater than the context length. Try to load the model with a larger context length, "
    "or provide a shorter input. Error Data: n/a, Additional Data: n/a\n",
    "no-model-loaded": "[2025-01-01 10:00:00][ERROR] No models loaded. Please load a model in the developer page or use "
    "the `lms load` command\n",
    # lmstudio-ai/lmstudio-bug-tracker#914
    "model-load-failed": "[2025-08-20 00:33:09.005] [error] [LMSInternal][Client=LM Studio][Endpoint=loadModel] "
    "No instance reference assigned before error\n",
    "prediction-error": "2025-05-01 10:00:00 [ERROR]\n[LM STUDIO SERVER] received prediction-error\n",
    # lmstudio-ai/lmstudio-bug-tracker#2257: a v1/responses request whose engine prediction failed
    "prediction-error-predict-request": '[2026-08-09 12:57:51][ERROR][Server Error] {\n  "error": {\n    '
    '"message": "Engine protocol predict request failed: fetch failed",\n  }\n}\n',
    # lmstudio-ai/lmstudio-bug-tracker#1347: the engine process died while generating
    "model-crashed": "[2026-01-01 16:01:39.279] [error] [LMSInternal][Client=LM Studio][Endpoint=sendMessage] Error in RPC "
    "handler: Error: Rehydrated error\n- Caused By: Error: The model has crashed without additional "
    "information. (Exit code: 18446744072635812000)\n",
}


@pytest.mark.parametrize("kind", ERRORS)
def test_server_error(tmp_path, kind):
    path = tmp_path / "lmstudio-server.log"
    path.write_text(ERRORS[kind])
    kinds = {e.kind for e in read_server_log(path).events}
    assert kind.removesuffix("-no-the").removesuffix("-predict-request").removesuffix("-tokens-to-keep") in kinds, kinds


def test_stream_end_and_policy_lines_are_normal(tmp_path):
    path = tmp_path / "lmstudio-server.log"
    path.write_text(
        "2025-01-24 13:15:34  [INFO] \n[LM STUDIO SERVER] Context Overflow Policy is: Rolling Window\n"
        "2025-01-24 13:15:40  [INFO] \n[LM STUDIO SERVER] Finished streaming response\n"
        "2025-01-24 13:15:40  [INFO] \n[LM STUDIO SERVER] Client disconnected. Stopping generation... "
        "(If the model is busy processing the prompt, it will finish first.)\n"
    )
    log = read_server_log(path)
    assert [e.kind for e in log.events] == ["client-disconnected"]
    assert all(e.noise for e in log.events)


def test_a_context_length_setting_is_no_overflow(tmp_path):
    """The words of the overflow wording in an INFO line that only reports the loaded context (issue 35's near miss)."""
    path = tmp_path / "lmstudio-server.log"
    path.write_text(
        "2026-07-25 00:56:30  [INFO]\n [gemma-4-12b-it-qat] Loaded with context length 8192; tokens to keep from the "
        "initial prompt: 4\n"
    )
    assert not [e for e in read_server_log(path).events if e.kind == "context-overflow"]
