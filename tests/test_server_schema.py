"""Schemathesis against the served OpenAPI schema: bad input never gives a 5xx.

Cases are drawn for every operation, valid and invalid (negative mode), with a real
session id substituted half of the time so the handlers behind the 404 run too. The
example count is kept small: this is a smoke net, not an exhaustive search.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode

from .server_fixtures import RunningServer, server  # noqa: F401

MAX_EXAMPLES = 50


def _real_session(server: RunningServer, tenant: str) -> str:  # noqa: F811
    with httpx.Client(base_url=server.url, headers=server.headers(tenant)) as client:
        response = client.post("/sessions", json={"label": "schemathesis"})
        assert response.status_code == 201, response.text
        sid: str = response.json()["id"]
        client.post(f"/sessions/{sid}/files", files={"file": ("data.csv", b"a,b\n1,2\n")})
        return sid


def _cleanup(server: RunningServer, tenant: str) -> None:  # noqa: F811
    with httpx.Client(base_url=server.url, headers=server.headers(tenant)) as client:
        for session in client.get("/sessions").json()["sessions"]:
            client.delete(f"/sessions/{session['id']}")


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
def test_no_input_gives_a_server_error(server: RunningServer) -> None:  # noqa: F811
    tenant = "carol"
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    schema.config.update(base_url=server.url)
    auth = {"Authorization": f"Bearer {server.tokens[tenant]}"}
    sid = _real_session(server, tenant)
    with_real_id = schema.exclude(method="DELETE")
    strategy = st.one_of(
        *(schema.as_strategy(mode, headers=auth) for mode in GenerationMode),
        *(with_real_id.as_strategy(mode, headers=auth, path_parameters={"sid": sid})
          for mode in GenerationMode),
    )
    statuses: set[int] = set()

    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def check(case: schemathesis.Case) -> None:
        response = case.call_and_validate(checks=[not_a_server_error], timeout=90)
        statuses.add(response.status_code)

    try:
        check()
    finally:
        _cleanup(server, tenant)
    assert statuses & {400, 404, 413, 422}, statuses
    assert statuses & {200, 201, 204}, statuses
