"""Helpers of the trigger tests."""

from __future__ import annotations

from typing import Any

import httpx


class ScriptedApi:
    """A MockTransport handler answering ``GET .../{key}`` (a scan id, an SBOM export token: the path's last
    segment) from a script per key: each answer once, the last one again and again. An answer is an
    ``httpx.Response`` or a JSON body (200)."""

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answers = self.script[request.url.path.rsplit("/", 1)[1]]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        return answer if isinstance(answer, httpx.Response) else httpx.Response(200, json=answer)
