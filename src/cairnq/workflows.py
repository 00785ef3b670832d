"""Workflows: tasks that run after others, graphs submitted at once, fan-out and fan-in.

``Graph`` describes tasks and the edges between them for ``CairnQ.submit_graph``;
``Dependency``, ``Workflow`` and ``Edge`` are what ``cq.workflows.dependencies`` and
``cq.workflows.get`` read back. ``Gathering`` is what ``ctx.gather`` raises to end the
attempt while its children run (let it propagate).

The feature lives in ``cairnq.extensions.workflows``; this module re-exports its
public names where they have always been imported from.
"""

from .extensions.workflows import (
    PARKED_RUN_AT_MS,
    POLICIES,
    Dependency,
    Edge,
    Gathering,
    Graph,
    GraphNode,
    Policy,
    Workflow,
)

__all__ = [
    "PARKED_RUN_AT_MS",
    "POLICIES",
    "Dependency",
    "Edge",
    "Gathering",
    "Graph",
    "GraphNode",
    "Policy",
    "Workflow",
]
