"""Where a piece of a fleet repository was written: file, line and column.

Every object and every field keeps the place it came from, so that any
finding — from the loader, the models, the policy, CEL or the inventory check —
points at the line a person has to edit. Lines and columns are 1-based, as
editors and GitHub annotations count them. A path is the tuple of mapping keys
and sequence indexes from the document root (``("spec", "devices", "requests",
0, "exactly")``), the same tuple pydantic puts in an error's ``loc``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

Path = tuple[str | int, ...]


class Location(NamedTuple):
    """A position in a repository file (1-based line and column; 0 = the whole file).

    A named tuple rather than a dataclass: the loader makes one per YAML node
    (tens of thousands for a large repository) and tuple construction is several
    times cheaper; it is immutable, hashable and ordered by file, line, column.
    """

    file: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        if not self.line:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"


class Positions:
    """The location of every node of one YAML document, by path.

    A mapping entry is located at its key (``count: 3`` → the ``count``
    token, and ``exactly:`` → its own line rather than the first nested
    field), a sequence item at the item. ``scalars`` keeps, for string
    scalars, the value's own start and its style so that a CEL error inside a
    block scalar can be mapped to the file line.

    Positions of a whole parsed document know how to make themselves again
    (``source``: re-parse the file's bytes), so a long-lived holder can ``release``
    the two maps and keep only ``root``: most positions are read only to place a
    finding, and a large repository's maps are a large part of its memory (``tools/memory.py``
    shows it). They come back, the same, on the next read.
    """

    __slots__ = ("_nodes", "_scalars", "_source", "root")

    def __init__(
        self,
        root: Location,
        nodes: Mapping[Path, Location] | None = None,
        scalars: Mapping[Path, Scalar] | None = None,
        *,
        source: Callable[[], tuple[Mapping[Path, Location], Mapping[Path, Scalar]]] | None = None,
    ) -> None:
        self.root = root
        self._nodes: Mapping[Path, Location] | None = {} if nodes is None else nodes
        self._scalars: Mapping[Path, Scalar] | None = {} if scalars is None else scalars
        self._source = source

    @property
    def nodes(self) -> Mapping[Path, Location]:
        return self._maps()[0]

    @property
    def scalars(self) -> Mapping[Path, Scalar]:
        return self._maps()[1]

    def _maps(self) -> tuple[Mapping[Path, Location], Mapping[Path, Scalar]]:
        nodes, scalars = self._nodes, self._scalars
        if nodes is None or scalars is None:
            assert self._source is not None  # released only when there is a source
            nodes, scalars = self._source()
            self._nodes, self._scalars = nodes, scalars  # two threads may both restore: the same maps
        return nodes, scalars

    def release(self) -> None:
        """Drop the maps if they can be made again (``source``); ``root`` stays."""
        if self._source is not None:
            self._nodes = self._scalars = None

    @property
    def released(self) -> bool:
        return self._nodes is None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Positions):
            return NotImplemented
        return (self.root, self.nodes, self.scalars) == (other.root, other.nodes, other.scalars)

    __hash__ = None  # type: ignore[assignment]  # mutable maps inside, as the dataclass it replaced

    def __repr__(self) -> str:
        return f"Positions(root={self.root!r}, {len(self.nodes)} nodes)"

    def at(self, path: Path) -> Location:
        """The location of ``path`` or of its nearest located ancestor."""
        for end in range(len(path), 0, -1):
            found = self.nodes.get(path[:end])
            if found is not None:
                return found
        return self.root

    def under(self, prefix: Path) -> Positions:
        """The positions of the subtree at ``prefix``, re-rooted there."""
        size = len(prefix)
        return Positions(
            root=self.at(prefix),
            nodes={p[size:]: loc for p, loc in self.nodes.items() if p[:size] == prefix},
            scalars={p[size:]: s for p, s in self.scalars.items() if p[:size] == prefix},
        )

    def replaced(self, *, prefix: Path, other: Positions) -> Positions:
        """These positions with the subtree at ``prefix`` taken from ``other``.

        ``other`` is rooted at ``prefix`` (as :meth:`under` returns it). Used by
        overlays: a merge patch replaces a subtree, and so do its locations.
        """
        size = len(prefix)
        nodes = {p: loc for p, loc in self.nodes.items() if p[:size] != prefix}
        scalars = {p: s for p, s in self.scalars.items() if p[:size] != prefix}
        nodes.update({prefix + p: loc for p, loc in other.nodes.items()})
        nodes[prefix] = other.root
        scalars.update({prefix + p: s for p, s in other.scalars.items()})
        return Positions(root=self.root, nodes=nodes, scalars=scalars)


class Scalar(NamedTuple):
    """Where a string scalar's text starts, and how it is written.

    ``style`` is ``""`` for plain, ``"'"`` / ``'"'`` for quoted, ``"|"`` /
    ``">"`` for block scalars; ``indent`` is the column (1-based) where a block
    scalar's content lines start. A named tuple, like :class:`Location`: the
    loader makes one per string value.
    """

    start: Location
    style: str = ""
    indent: int = 0

    def locate(self, *, line: int, col: int) -> Location:
        """Map a 1-based line/column inside the string to the file."""
        if self.style in ("|", ">"):
            return Location(self.start.file, self.start.line + line, self.indent + col - 1)
        if line <= 1:
            quote = 1 if self.style in ("'", '"') else 0
            return Location(self.start.file, self.start.line, self.start.col + quote + col - 1)
        return Location(self.start.file, self.start.line + line - 1, col)


__all__ = ["Location", "Path", "Positions", "Scalar"]
