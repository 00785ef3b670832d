"""The workflow graph on the dashboard's task page: its layout, and the SVG it draws."""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator

import pytest

from cairnq import CairnQ, kernel
from cairnq.dashboard import create_app
from cairnq.extensions.workflows import _ops as _workflows
from cairnq.extensions.workflows._graph import layers, layout

from ._db import Database
from .test_dashboard import WORKER, http, start
from .test_without_extensions import protocol_only

DIAMOND = {
    "a": {"task": "fetch"},
    "b": {"task": "clean", "after": ["a"]},
    "c": {"task": "stats", "after": ["a"]},
    "d": {"task": "report", "after": ["b", "c"]},
}


# --- layout ------------------------------------------------------------------------------


def test_a_diamond_is_laid_out_in_three_layers() -> None:
    found = layers(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    assert found == {"a": 0, "b": 1, "c": 1, "d": 2}


def test_a_node_sits_below_its_longest_path_not_its_shortest() -> None:
    edges = [("a", "b"), ("b", "c"), ("a", "c")]
    assert layers(["a", "b", "c"], edges) == {"a": 0, "b": 1, "c": 2}


def test_a_chain_gets_one_layer_per_task() -> None:
    names = [f"n{i}" for i in range(6)]
    edges = list(itertools.pairwise(names))
    assert layers(names, edges) == {n: i for i, n in enumerate(names)}


def test_a_fan_out_of_100_puts_the_children_on_one_layer_wrapped_onto_rows() -> None:
    children = [f"c{i:03}" for i in range(100)]
    pic = layout(["p", *children], [("p", c, "child") for c in children], per_row=6)
    placed = {n.id: n for n in pic.nodes}
    assert {placed[c].layer for c in children} == {1}
    assert placed["p"].layer == 0
    rows = {placed[c].y for c in children}
    assert len(rows) == 17  # 100 children, 6 a row
    assert all(placed[c].y > placed["p"].y for c in children)
    assert len({(n.x, n.y) for n in pic.nodes}) == 101
    assert len(pic.edges) == 100
    assert max(n.x for n in pic.nodes) < pic.width and max(n.y for n in pic.nodes) < pic.height


def test_every_edge_points_down_to_a_lower_layer() -> None:
    edges = [("a", "b", "after"), ("a", "c", "after"), ("b", "d", "after"), ("c", "d", "after")]
    pic = layout(["a", "b", "c", "d"], edges)
    assert [(e.source, e.target) for e in pic.edges] == [(s, t) for s, t, _ in edges]
    assert all(e.y2 > e.y1 for e in pic.edges)


def test_the_same_graph_is_laid_out_the_same_way_every_time() -> None:
    nodes = [f"t{i}" for i in range(30)]
    edges = [
        (nodes[i], nodes[j], "after")
        for i in range(30)
        for j in range(i + 1, 30)
        if j % (i + 2) == 0
    ]
    first = layout(nodes, edges)
    assert all(layout(list(nodes), list(edges)) == first for _ in range(5))


def test_a_parent_gathering_its_children_stays_above_them() -> None:
    # gather records the parent as running after each child: each child is spawned by
    # the parent (child edge) and runs before its re-run (after edge).
    edges = [("p", "c1"), ("p", "c2"), ("c1", "p"), ("c2", "p")]
    assert layers(["p", "c1", "c2"], edges) == {"p": 0, "c1": 1, "c2": 1}


def test_a_cycle_does_not_stop_the_layout() -> None:
    found = layers(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "b")])
    assert set(found) == {"a", "b", "c"} and found["a"] == 0


# --- the task page -----------------------------------------------------------------------


@pytest.fixture
async def cq(db: Database) -> AsyncIterator[CairnQ]:
    async with db.client() as client:
        yield client


def _svg(page: str) -> str:
    found = re.search(r'<svg class="wf-graph".*?</svg>', page, re.S)
    assert found is not None, "no workflow graph on the page"
    return found.group(0)


async def test_the_task_page_draws_a_diamond_with_nodes_edges_links_and_statuses(
    cq: CairnQ,
) -> None:
    tasks = await cq.submit_graph(DIAMOND)
    lease = await start(cq, "fetch")
    await cq.backend.arun(
        kernel.complete(lease, WORKER, '"ok"', points=kernel.ending_with(_workflows.after_ended)),
        write=True,
    )
    ids = {name: t.id for name, t in tasks.items()}
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": ids["b"]})).text
    svg = _svg(page)
    nodes = re.findall(r'<g class="wf-node ([^"]*)" data-task="([^"]+)"', svg)
    classes = {task_id: cls for cls, task_id in nodes}
    assert set(classes) == set(ids.values())
    assert classes[ids["a"]] == "s-succeeded"
    assert classes[ids["b"]] == "s-queued wf-current"
    assert classes[ids["d"]] == "s-queued wf-parked"
    for task_id in ids.values():
        assert f'<a href="/task?id={task_id}">' in svg
    edges = set(re.findall(r'class="wf-edge wf-after" data-from="([^"]+)" data-to="([^"]+)"', svg))
    expected = {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")}
    assert edges == {(ids[s], ids[t]) for s, t in expected}
    assert ">fetch<" in svg and ">report<" in svg


async def test_a_spawned_child_is_drawn_under_its_parent_with_a_dashed_edge(cq: CairnQ) -> None:
    parent = await cq.submit("parent")
    child = await cq.submit("child", parent_id=parent.id, root_id=parent.id)
    async with http(create_app(cq)) as client:
        svg = _svg((await client.get("/task", params={"id": child.id})).text)
    assert f'class="wf-edge wf-child" data-from="{parent.id}" data-to="{child.id}"' in svg


async def test_a_fan_out_gathered_by_its_parent_draws_the_children_below_it(cq: CairnQ) -> None:
    parent = await cq.submit("parent")
    lease = await start(cq, "parent")
    kids = [
        await cq.submit("child", {"n": n}, parent_id=parent.id, root_id=parent.id) for n in range(3)
    ]
    gather = _workflows.gather(lease, WORKER, [k.id for k in kids])
    await cq.backend.arun(gather, write=True)
    async with http(create_app(cq)) as client:
        svg = _svg((await client.get("/task", params={"id": parent.id})).text)
    tops = {
        task: int(y)
        for task, y in re.findall(
            r'data-task="([^"]+)"><title>[^<]*</title><rect x="\d+" y="(\d+)"', svg
        )
    }
    assert all(tops[parent.id] < tops[k.id] for k in kids), tops


async def test_a_task_outside_any_workflow_has_no_workflow_card(cq: CairnQ) -> None:
    task = await cq.submit("alone")
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": task.id})).text
    assert "wf-graph" not in page and "<h2>Workflow</h2>" not in page


async def test_a_large_workflow_draws_at_most_200_tasks_and_says_how_many_are_left_out(
    cq: CairnQ,
) -> None:
    graph = {"root": {"task": "fan"}} | {
        f"n{i:03}": {"task": "leaf", "after": ["root"]} for i in range(209)
    }
    tasks = await cq.submit_graph(graph)
    async with http(create_app(cq)) as client:
        page = (await client.get("/task", params={"id": tasks["n208"].id})).text
    svg = _svg(page)
    assert svg.count('<g class="wf-node') == 200
    assert f'data-task="{tasks["n208"].id}"' in svg
    assert "10 more tasks of this workflow not drawn" in page


async def test_without_the_workflow_tables_the_task_page_shows_no_graph(db: Database) -> None:
    protocol_only(db)
    async with db.client(migrate=False) as cq:
        parent = await cq.submit("parent")
        child = await cq.submit("child", parent_id=parent.id, root_id=parent.id)
        async with http(create_app(cq)) as client:
            response = await client.get("/task", params={"id": child.id})
    assert response.status_code == 200
    assert "wf-graph" not in response.text


async def test_the_live_refresh_of_a_task_page_redraws_the_graph_with_fresh_statuses(
    cq: CairnQ,
) -> None:
    tasks = await cq.submit_graph(DIAMOND)
    async with http(create_app(cq)) as client:
        lease = await start(cq, "fetch")
        live = {"X-Cairnq-Live": "1"}
        fragment = (await client.get("/task", params={"id": tasks["d"].id}, headers=live)).text
    assert '<div data-live-part="workflows">' in fragment
    assert f'<g class="wf-node s-running" data-task="{lease.id}"' in _svg(fragment)
