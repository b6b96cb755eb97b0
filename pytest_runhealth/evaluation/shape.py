"""RH507's two readings of API drift: a body checked against the deployed
OpenAPI document (its ``$ref`` resolved inside the document), and a 422 in
the client's own log. jsonschema is imported only here."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .settings import DEFAULT_ROUTES

SUBMIT_PATH = DEFAULT_ROUTES["submit"]
# httpx/requests/FastAPI wordings of a 422 answer.
HTTP_422 = re.compile(
    r"\b422\b[^\n]{0,40}Unprocessable|Unprocessable (?:Entity|Content)|status(?:_code)?[ =:\"]+422\b|HTTP/\S+ 422\b|HTTP 422\b",
    re.I,
)


@dataclass
class ShapeProblem:
    schema_name: str
    summary: str
    messages: list[str] = field(default_factory=list)


def request_schema(openapi: dict, path: str = SUBMIT_PATH) -> tuple[str, dict] | None:
    """The JSON body schema of ``POST path`` as (name, schema)."""
    try:
        op = openapi["paths"][path]["post"]
        content = op["requestBody"]["content"]
    except (KeyError, TypeError):
        return None
    media = content.get("application/json") or next(iter(content.values()), None) if isinstance(content, dict) else None
    schema = media.get("schema") if isinstance(media, dict) else None
    if not isinstance(schema, dict):
        return None
    ref = schema.get("$ref", "")
    return (ref.rsplit("/", 1)[-1] if ref else "inline schema"), schema


def validate_body(openapi: dict, body: Any, path: str = SUBMIT_PATH) -> ShapeProblem | None:
    import jsonschema

    found = request_schema(openapi, path)
    if found is None:
        return ShapeProblem("?", f"the OpenAPI document has no JSON request body for POST {path}")
    name, schema = found
    # $ref like "#/components/schemas/X" resolves against the root: give the root the components.
    root = dict(schema)
    root["components"] = openapi.get("components") or {}
    root.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    validator = jsonschema.Draft202012Validator(root)
    errors = sorted(validator.iter_errors(body), key=lambda e: (list(e.absolute_path), e.message))
    if not errors:
        return None
    extra: list[str] = []
    missing: list[str] = []
    other: list[str] = []
    for err in errors:
        where = ".".join(str(p) for p in err.absolute_path)
        prefix = f"{where}." if where else ""
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            allowed = set(err.schema.get("properties", {}))
            extra += [prefix + k for k in err.instance if k not in allowed]
        elif err.validator == "required" and isinstance(err.instance, dict):
            missing += [prefix + k for k in err.schema.get("required", []) if k not in err.instance]
        else:
            other.append(f"{where or '(body)'}: {err.message}")
    parts = []
    if extra:
        parts.append("unexpected field(s) " + ", ".join(dict.fromkeys(extra)))
    if missing:
        parts.append("missing " + ", ".join(dict.fromkeys(missing)))
    if isinstance(body, dict) and "requester_slot" in body and "requester" in body:
        parts.append("a top-level requester_slot beside requester (the seat belongs inside the roster entry)")
    if isinstance(body, dict) and ({"requester", "opponents"} & set(body)):
        parts.append("this is the pre-rework requester/opponents shape")
    parts += other[:3]
    messages = (
        [f"unexpected field: {f}" for f in dict.fromkeys(extra)]
        + [f"missing field: {f}" for f in dict.fromkeys(missing)]
        + other
    )
    return ShapeProblem(name, "; ".join(parts), messages)


def client_422s(logs: list, tail_of: Callable) -> list[tuple[Any, int, str]]:
    """(path, line, text) of 422 answers in the tails of the client's logs."""
    hits = []
    for path in logs:
        try:
            tail = tail_of(path)
        except OSError:
            continue
        hits += [(path, tl.line, tl.text) for tl in tail.lines if HTTP_422.search(tl.text)]
    return hits
