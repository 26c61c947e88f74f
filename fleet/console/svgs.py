"""Allocation drawn as SVG on the server: stacked bars of devices by state, per node and per pool.

No script draws them: a page reads the same without JavaScript. Each bar is an ``img`` with a
text alternative that says the numbers, and each part has a ``title`` for a pointer's tooltip;
the colours come from the stylesheet (classes ``s-allocated`` …), so the legend and the bars agree.
"""

from __future__ import annotations

from collections.abc import Mapping

from markupsafe import Markup, escape

from fleet.inventory.leftovers import STATES

WIDTH = 240
HEIGHT = 14


def bar(label: str, counts: Mapping[str, int], *, width: int = WIDTH, height: int = HEIGHT) -> Markup:
    """One stacked bar: ``counts`` by state (``leftovers.STATES``), scaled to ``width``."""
    total = sum(counts.get(state, 0) for state in STATES)
    said = ", ".join(f"{counts[s]} {s}" for s in STATES if counts.get(s))
    alt = f"{label}: {total} devices" + (f", {said}" if said else "")
    parts = []
    x = 0.0
    for state in STATES:
        n = counts.get(state, 0)
        if not n or not total:
            continue
        w = width * n / total
        parts.append(
            f'<rect class="s-{state}" x="{x:.2f}" y="0" width="{w:.2f}" height="{height}">'
            f"<title>{n} {state}</title></rect>"
        )
        x += w
    if not parts:
        parts.append(f'<rect class="s-none" x="0" y="0" width="{width}" height="{height}"/>')
    return Markup(
        f'<svg class="bar" role="img" aria-label="{escape(alt)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="none" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>'
    )


def cells(label: str, named: list[tuple[str, str]], *, size: int = 12, per_row: int = 16) -> Markup:
    """A heat map of one node: a square per (device, state) in its state's colour, in the devices' order.
    The squares carry no title of their own (a thousand nodes' pages stay small): the text
    alternative counts the states, and the node's page names each device."""
    states = [state for _, state in named]
    rows = max(1, -(-len(states) // per_row))
    width, height = per_row * (size + 2), rows * (size + 2)
    said = ", ".join(f"{states.count(s)} {s}" for s in STATES if s in states)
    # Size and corners come from the stylesheet (svg.cells rect): 8,000 squares stay small markup.
    parts = [
        f'<rect class="s-{state}" x="{(i % per_row) * (size + 2)}" y="{(i // per_row) * (size + 2)}"/>'
        for i, (_, state) in enumerate(named)
    ]
    return Markup(
        f'<svg class="cells" role="img" aria-label="{escape(label)}: {escape(said or "no devices")}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>'
    )


__all__ = ["bar", "cells"]
