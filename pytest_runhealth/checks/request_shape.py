"""RH507: the shape of an evaluation request against the deployed API (an RH5xx check). The other RH5xx
checks, which judge the rounds and the gate, are in ``eval.py``."""

from __future__ import annotations

from ..model.registry import check


# -- RH507 ---------------------------------------------------------------------
@check(
    "RH507",
    "request-shape",
    needs=["harvest"],
    scope="session",
    phases=["prelaunch", "postmortem"],
    verdicts=["infra", "not-evaluable"],
    detects="A request body (request_body.json, or --eval-body FILE) does not validate against the deployed "
    "server's OpenAPI schema (openapi.json, or the server's /openapi.json; $ref resolved, checked with "
    "jsonschema), naming the offending fields, e.g. the pre-rework requester/opponents shape or a top-level "
    "requester_slot. Also a 422 answer in the eval client's log.",
    why="The request shape drifts (the 2026-06-12 rework to a roster body); a 422 is API drift, not a policy failure.",
    example="request_body.json: unexpected field(s) requester, opponents, requester_slot; missing roster",
    fix="Conform to the deployed OpenAPI: one `roster` entry per seat, `{player: {policy_ref: …}, slot: N}`; "
    "re-fetch live members and validate every policy version right before launch.",
    fails_on={"harvest-shape-drift": "api-shape-drift"},
    passes_on=["harvest-healthy"],
)
def request_shape(ctx):
    from ..evaluation.shape import client_422s, validate_body

    ev = ctx.evaluation.of()
    hits = client_422s(ev.client_logs, ctx.run_dir.log_tail)
    if ev.body is None and not ev.client_logs:
        ctx.skip("no request body (request_body.json or --eval-body) and no client log to check")
    out = []
    if ev.body is not None:
        if not ev.openapi:
            out.append(
                ctx.fail(
                    "not-evaluable",
                    None,
                    f"no deployed OpenAPI schema to validate {ev.body_source} against "
                    f"({ev.openapi_source or 'openapi.json not harvested'}).",
                    fix="harvest the server's /openapi.json beside the body, or pass --eval-server.",
                )
            )
        else:
            problem = validate_body(ev.openapi, ev.body)
            if problem:
                out.append(
                    ctx.fail(
                        "infra",
                        "api-shape-drift",
                        f"{ev.body_source} does not validate against {ev.openapi_source} "
                        f"({problem.schema_name}): {problem.summary}",
                        [ctx.evidence(ev.body_source, None, m) for m in problem.messages[:6]],
                    )
                )
    if hits:
        out.append(
            ctx.fail(
                "infra",
                "api-shape-drift",
                f"the client log shows {len(hits)} 422 answer(s): the server rejected the request shape.",
                [ctx.evidence(p, ln, t) for p, ln, t in hits[:5]],
            )
        )
    if out:
        return out
    return "request body valid against the deployed schema" if ev.body is not None else "no 422 in the client log"
