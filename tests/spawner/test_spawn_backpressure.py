"""The pure parts of spawning at scale: the availability tally kept one pod event at a time
(the same numbers as a full recount), the hub's spawn queue (arrival order, its place, a
cancelled spawn leaving it), and the retry schedule (jittered, never sooner than Retry-After)."""

from __future__ import annotations

import asyncio
import random
from typing import Any, cast

import pytest
from kubernetes_asyncio.client.rest import ApiException
from test_spawner_options import CATALOG, node, pod

from kubelab.spawner import retry
from kubelab.spawner.availability import Tally, cluster_availability
from kubelab.spawner.spawn_queue import SpawnQueue


def as_numbers(result: Any) -> tuple[Any, ...]:
    def table(t: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in t.items() if v.gpus or v.cpu or v.memory}

    return (
        result.types,
        result.unattributed,
        table(result.users),
        table(result.groups),
        table(result.namespaces),
    )


def test_the_tally_kept_per_event_equals_a_full_recount() -> None:
    nodes = [node("t4-a", "nvidia-t4", 4), node("t4-b", "nvidia-t4", 2), node("v-a", "V100", 8)]
    rng = random.Random(7)
    live: dict[str, dict[str, Any]] = {}
    tally = Tally(CATALOG)
    tally.rebuild(nodes, [])
    for step in range(400):
        key = f"ns{rng.randrange(5)}/p{rng.randrange(30)}"
        if rng.random() < 0.25:
            live.pop(key, None)
            tally.pod(key, None)
            continue
        changed = pod(
            key.split("/")[1],
            rng.randrange(3),
            rng.choice(["Pending", "Running", "Running", "Succeeded"]),
            node_name=rng.choice([None, "t4-a", "t4-b", "v-a"]),
            selector=rng.choice([{}, {"gpu-type": "V100"}]),
            user=rng.choice(["ann", "bo", None]),
            group=rng.choice(["vision", None]),
        )
        changed["metadata"]["namespace"] = key.split("/")[0]
        live[key] = changed
        tally.pod(key, changed)
        if step % 20 == 0:
            assert as_numbers(tally.result) == as_numbers(cluster_availability(nodes, live.values(), CATALOG))
    assert as_numbers(tally.result) == as_numbers(cluster_availability(nodes, live.values(), CATALOG))


def test_the_queue_serves_in_arrival_order_and_says_who_is_ahead() -> None:
    async def go() -> None:
        queue = SpawnQueue(2)
        loop = asyncio.get_running_loop()
        tickets = [loop.create_future() for _ in range(5)]
        order: list[int] = []
        release = asyncio.Event()

        async def spawn(i: int) -> None:
            async with queue.turn(tickets[i]):
                order.append(i)
                await release.wait()

        tasks = [asyncio.create_task(spawn(i)) for i in range(5)]
        while len(queue.waiting) < 3:
            await asyncio.sleep(0)
        assert order == [0, 1]
        assert [queue.ahead(t) for t in tickets] == [None, None, 0, 1, 2]
        tasks[3].cancel()  # a user who gave up leaves the queue
        await asyncio.gather(tasks[3], return_exceptions=True)
        assert [queue.ahead(t) for t in tickets[2:]] == [0, None, 1]
        release.set()
        await asyncio.gather(*(t for i, t in enumerate(tasks) if i != 3))
        assert order == [0, 1, 2, 4] and queue.running == 0 and not queue.waiting

    asyncio.run(go())


def busy(status: int, retry_after: str | None = None) -> ApiException:
    exc = ApiException(status=status, reason="busy")
    exc.headers = cast(Any, {"Retry-After": retry_after} if retry_after else {})
    return exc


def test_retries_wait_at_least_what_the_server_asked_and_never_in_step() -> None:
    delays = [retry.delay(attempt, busy(429, "2")) for attempt in range(4) for _ in range(20)]
    assert min(delays) >= 2 and len(set(delays)) > 10
    assert all(0 <= retry.delay(a) <= retry.MAX_DELAY for a in range(20))


def test_busy_answers_are_retried_and_the_last_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, "BASE_DELAY", 0.001)
    answers: list[ApiException | str] = [busy(503), busy(429, "0"), "done"]

    async def call() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert asyncio.run(retry.retrying(call)) == "done"

    async def refused() -> str:
        raise busy(429, "0")

    with pytest.raises(ApiException) as err:
        asyncio.run(retry.retrying(refused, attempts=3))
    assert "overloaded (429 Too Many Requests)" in retry.cause(err.value, "slow down", 3)
    conflicts = [ApiException(status=409, reason="Conflict")]

    async def conflict() -> str:
        if conflicts:
            raise conflicts.pop()
        return "applied"

    assert asyncio.run(retry.retrying(conflict, conflicts=True)) == "applied"
    conflicts.append(ApiException(status=409, reason="Conflict"))
    with pytest.raises(ApiException):  # a create's 409 is an answer, not a hiccup
        asyncio.run(retry.retrying(conflict))


def test_a_queued_spawns_progress_says_how_many_are_ahead() -> None:
    from kubelab.spawner.cli import _OfflineKube
    from kubelab.spawner.kube import KubeLabSpawner
    from kubelab.spawner.spawn_queue import hub_queue

    async def go() -> list[str]:
        loop = asyncio.get_running_loop()
        spawner = KubeLabSpawner(
            _mock=True, events_enabled=False, gpu_catalog={"gpu_types": [{"name": "T4"}]}, spawn_concurrency=1
        )
        queue, hold = hub_queue(1), asyncio.Event()

        async def occupy(ticket: asyncio.Future[None]) -> None:
            async with queue.turn(ticket):
                await hold.wait()

        spawner._start_future = loop.create_future()
        tickets = [loop.create_future(), loop.create_future()]
        spawner._ticket = loop.create_future()
        tasks = [asyncio.create_task(occupy(t)) for t in [*tickets, spawner._ticket]]
        while queue.ahead(spawner._ticket) != 1:
            await asyncio.sleep(0)
        messages: list[str] = []

        async def read() -> None:
            async for event in spawner.progress():
                messages.append(event["message"])
                if len(messages) == 1:
                    tickets[1].cancel()  # the spawn ahead gives up: one fewer ahead
                if len(messages) == 2:
                    hold.set()

        await asyncio.wait_for(read(), 30)
        await asyncio.gather(*tasks, return_exceptions=True)
        return messages

    with _OfflineKube():
        assert asyncio.run(go()) == ["starting, 1 ahead of you", "starting, 0 ahead of you"]


def test_a_nodes_heartbeat_does_not_recount_every_pod_but_a_capacity_change_does() -> None:
    import types

    from kubelab.spawner.availability import ClusterAvailability

    api = types.SimpleNamespace(list_node=None, list_pod_for_all_namespaces=None, list_namespace=None)
    watch = ClusterAvailability(api, CATALOG)
    t4 = node("t4-a", "nvidia-t4", 4)
    watch.nodes.items = {"/t4-a": t4}
    watch.pods.items = {
        "ns/p": {**pod("p", 1, node_name="t4-a"), "metadata": {"name": "p", "namespace": "ns"}}
    }
    watch._nodes_changed("/t4-a", t4)
    before = watch.current()
    assert before.types["T4"].free == 3
    beat = {**t4, "status": {**t4["status"], "conditions": [{"type": "Ready", "lastHeartbeatTime": "now"}]}}
    watch._nodes_changed("/t4-a", beat)
    assert watch.current() is before  # the same tally: no recount
    grown = {**t4, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    watch.nodes.items = {"/t4-a": grown}
    watch._nodes_changed("/t4-a", grown)
    assert watch.current().types["T4"].free == 7
