"""``POST …/end?wait=S`` takes 0–60 seconds; a value that is no finite number is refused with a message
that says so (helper 3's probe of 2026-12-06: ``?wait=NaN`` got "should be less than or equal to 60")."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.helpers import user


@pytest.mark.parametrize("wait", ["NaN", "nan", "inf", "-inf", "Infinity"])
def test_a_wait_that_is_no_finite_number_is_refused_as_such(client: TestClient, wait: str) -> None:
    refused = client.post(f"/api/memory/sessions/s1/end?wait={wait}", headers=user("wait"))
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [{"field": "query.wait", "message": "Input should be a finite number"}]


@pytest.mark.parametrize(
    ("wait", "message"),
    [("61", "Input should be less than or equal to 60"), ("-1", "Input should be greater than or equal to 0")],
)
def test_a_wait_out_of_bounds_names_its_bound(client: TestClient, wait: str, message: str) -> None:
    refused = client.post(f"/api/memory/sessions/s1/end?wait={wait}", headers=user("wait"))
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"] == [{"field": "query.wait", "message": message}]
