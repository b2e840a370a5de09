"""JSON responses rendered with orjson, and the findings page assembled from stored bytes."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Response


class OrjsonResponse(Response):
    """A JSON response serialised with orjson (FastAPI's own ORJSONResponse is deprecated)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        """Serialise ``content``."""
        return orjson.dumps(content)


def raw_json(body: bytes, status: int = 200) -> Response:
    """A response whose body is JSON already serialised."""
    return Response(content=body, status_code=status, media_type="application/json")
