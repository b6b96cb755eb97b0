"""A client for the LM Studio judge that knows its three APIs and its quirks
(lmstudio.ai/docs, "REST API"): the OpenAI-compatible routes, the v0 REST API (models with
``state: loaded``) and the v1 native API (``loaded_instances``; unloading is
``POST /api/v1/models/unload``). LM Studio answers a route it does not know
with HTTP 200 and ``{"error": "Unexpected endpoint or method. …"}``, so a 200
is not a success until the body says so."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .http import DEFAULT_TIMEOUT, MAX_BODY, HttpClients, Reply, request_json

DEFAULT_URL = "http://127.0.0.1:1234"
UNEXPECTED = "Unexpected endpoint or method"
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S | re.I)


def normalise_base_url(url: str) -> str:
    """``http://h:1234/``, ``http://h:1234/v1`` and ``http://h:1234`` name the
    same server; joining the first two naively gives ``//v1/models`` or
    ``/v1/v1/models``, both unknown routes that LM Studio answers with 200."""
    url = url.strip().rstrip("/")
    for suffix in ("/v1", "/api/v0", "/api/v1"):
        if url.endswith(suffix):
            url = url[: -len(suffix)].rstrip("/")
    if "://" not in url:
        url = "http://" + url
    return url


@dataclass
class LoadedModel:
    id: str
    source: str  # the route that said so
    detail: str = ""


@dataclass
class JudgeAnswer:
    """One tiny scoring exchange with the judge model."""

    reply: Reply
    content: str = ""
    reasoning: str = ""
    scores: dict[str, Any] | None = None
    found_in: str = ""  # content | reasoning_content
    thinking: bool = False  # <think> blocks or a reasoning_content field


def api_error(reply: Reply) -> tuple[str, str] | None:
    """(kind, message) when LM Studio refused the request in its body: the
    HTTP-200 ``Unexpected endpoint`` answer, or an ``invalid_api_key``."""
    data = reply.data
    if not isinstance(data, dict) or "error" not in data:
        return None
    err = data["error"]
    if isinstance(err, str):
        msg = err
        code = ""
    elif isinstance(err, dict):
        msg = str(err.get("message") or err)
        code = str(err.get("code") or err.get("type") or "")
    else:
        msg, code = str(err), ""
    if UNEXPECTED in msg:
        return "unexpected-endpoint", msg
    if code == "invalid_api_key" or "API token is required" in msg:
        return "auth", msg
    return "error", msg


def extract_scores(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (after ``<think>`` blocks are cut)
    that carries at least one number: what a scorer can use."""
    text = _THINK.sub("", text or "")
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(obj, dict) and _has_number(obj):
            return obj
    return None


def _has_number(obj: Any) -> bool:
    if isinstance(obj, bool):
        return False
    if isinstance(obj, (int, float)):
        return True
    if isinstance(obj, dict):
        return any(_has_number(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_number(v) for v in obj)
    return False


SCORING_PROMPT = (
    'You are a strict image-caption judge. Prompt: "a red cube on a table". '
    'Caption: "a red cube resting on a wooden table". '
    'Reply with JSON only, exactly {"score": <integer 0-10>}.'
)


class LMStudioClient:
    """Every call is one bounded request (timeout, size cap); answers are
    cached per route for the session, so a round of checks asks once."""

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_bytes: int = MAX_BODY,
    ) -> None:
        self.given_url = base_url
        self.base_url = normalise_base_url(base_url)
        self.token = token or None
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._cache: dict[tuple, Reply] = {}
        self.http = HttpClients()  # this client's connections' settings, built once (the CA bundle for https)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def request(
        self, method: str, route: str, body: Any = None, cache: bool = True, timeout: float | None = None
    ) -> Reply:
        key = (method, route, json.dumps(body, sort_keys=True) if body is not None else None)
        if cache and key in self._cache:
            return self._cache[key]
        reply = request_json(
            method,
            self.base_url + route,
            timeout=timeout or self.timeout,
            max_bytes=self.max_bytes,
            headers=self._headers(),
            body=body,
            clients=self.http,
        )
        if cache:
            self._cache[key] = reply
        return reply

    # -- routes ----------------------------------------------------------------
    def models(self) -> Reply:
        """``GET /v1/models``: the reachability probe."""
        return self.request("GET", "/v1/models")

    def loaded_models(self) -> tuple[list[LoadedModel], Reply]:
        """Models resident in memory, from the v1 native API (0.4.0+), else v0."""
        v1 = self.request("GET", "/api/v1/models")
        if v1.ok and api_error(v1) is None and isinstance(v1.data, dict) and isinstance(v1.data.get("models"), list):
            out = []
            for m in v1.data["models"]:
                if not isinstance(m, dict):
                    continue
                for inst in m.get("loaded_instances") or []:
                    iid = inst.get("id") if isinstance(inst, dict) else inst
                    out.append(LoadedModel(str(iid or m.get("key")), "/api/v1/models", f"model {m.get('key')}"))
            return out, v1
        v0 = self.request("GET", "/api/v0/models")
        if v0.ok and api_error(v0) is None and isinstance(v0.data, dict) and isinstance(v0.data.get("data"), list):
            out = [
                LoadedModel(str(m.get("id")), "/api/v0/models", f"type {m.get('type')}")
                for m in v0.data["data"]
                if isinstance(m, dict) and m.get("state") == "loaded"
            ]
            return out, v0
        return [], v0 if v1.problem is None else v1

    def unload(self, instance_id: str) -> Reply:
        """``POST /api/v1/models/unload``: the unload that works (v0 has none).
        The checks never call it; it is here for users' own tests."""
        return self.request("POST", "/api/v1/models/unload", {"instance_id": instance_id}, cache=False)

    def judge(self, model: str, timeout: float | None = None) -> JudgeAnswer:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": SCORING_PROMPT}],
            "temperature": 0,
            "max_tokens": 512,
            "stream": False,
        }
        reply = self.request("POST", "/v1/chat/completions", body, timeout=timeout)
        answer = JudgeAnswer(reply)
        if not reply.ok or api_error(reply) is not None or not isinstance(reply.data, dict):
            return answer
        choices = reply.data.get("choices") or []
        msg = choices[0].get("message", {}) if choices and isinstance(choices[0], dict) else {}
        if not isinstance(msg, dict):
            msg = {}
        answer.content = str(msg.get("content") or "")
        answer.reasoning = str(msg.get("reasoning_content") or msg.get("reasoning") or "")
        answer.thinking = bool(answer.reasoning) or "<think>" in answer.content.lower()
        for where, text in (("content", answer.content), ("reasoning_content", answer.reasoning)):
            scores = extract_scores(text)
            if scores is not None:
                answer.scores, answer.found_in = scores, where
                break
        return answer
