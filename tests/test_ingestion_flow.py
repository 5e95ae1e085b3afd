"""The ingestion flow under Prefect (ephemeral local server): batch in, one embed call, indexed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from agtos.flows.ingestion_flow import ingestion_flow
from agtos.flows.runtime import use_runtime
from agtos.memory.coordinator import MemoryCoordinator


@pytest.fixture
def registered(coordinator: MemoryCoordinator) -> Iterator[MemoryCoordinator]:
    use_runtime(coordinator.services)
    yield coordinator
    use_runtime(None)


def session(i: int) -> dict:
    return {
        "user_id": "flow-user",
        "session_id": f"s{i}",
        "turns": [
            {"role": "user", "content": f"I prefer window seats on flight number {i}."},
            {"role": "assistant", "content": "Noted, window seat."},
        ],
    }


def test_flow_ingests_a_batch_idempotently(registered: MemoryCoordinator) -> None:
    calls: list[int] = []
    embedder = registered.semantic.embedder
    original = embedder.embed

    def counting_embed(texts: list[str]):
        calls.append(len(texts))
        return original(texts)

    embedder.embed = counting_embed  # type: ignore[method-assign]
    greeting = {"user_id": "flow-user", "session_id": "hi", "turns": [{"role": "user", "content": "hi"}]}
    report = ingestion_flow([session(i) for i in range(12)] + [greeting])
    assert report["received"] == 13 and report["stored"] == 12
    assert report["skipped"] == [{"sessionId": "hi", "reason": "greeting or small talk only"}]
    # one embedding call for the whole batch's texts (12 episodes' turns and facts), one for the new
    # entity names of the whole batch: only the user ("User") is named in these sessions
    assert len(calls) == 2 and calls[0] >= 12 and calls[1] == 1

    again = ingestion_flow([session(i) for i in range(12)])
    assert again["stored"] == 12
    assert len(registered.list_episodes("flow-user", 100)) == 12  # same ids: nothing duplicated
    hits = registered.search_episodes("flow-user", "flight number 7 window seat", 3)
    assert hits and hits[0].episode.session_id == "s7"


def test_flow_run_is_recorded_by_prefect(registered: MemoryCoordinator) -> None:
    """This call's own flow run (by the id in its returned state) is recorded as completed."""
    from prefect.client.orchestration import get_client

    state = ingestion_flow([session(1)], return_state=True)
    run_id = state.state_details.flow_run_id
    assert run_id is not None and state.result()["stored"] == 1

    async def recorded() -> tuple[str, str]:
        async with get_client() as client:
            run = await client.read_flow_run(run_id)
            flow = await client.read_flow(run.flow_id)
            assert run.state is not None
            return flow.name, run.state.type.value

    assert asyncio.run(recorded()) == ("ingestion", "COMPLETED")
