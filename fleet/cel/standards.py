"""Kubernetes' standard device attributes, and selectors that use one as a value of another type.

In Kubernetes' DRA environment ``device.attributes`` is ``map(string, map(string, dyn))``:
the API server cannot know an attribute's type, so it accepts
``device.attributes['resource.kubernetes.io'].numaNode == '0'``, and the scheduler then
answers false on every device (CEL's equality across types), or fails the selector
(``numaNode.startsWith('0')``: no such overload) and leaves the pod Pending. The domain
``resource.kubernetes.io`` is Kubernetes' own, though, and k8s.io/dynamic-resource-allocation
v0.37.2 (``deviceattribute``) fixes the type of each of its names: ``pciBusID`` (extended BDF,
``0000:3b:00.0``) and ``pcieRoot`` (``pci0000:30``) are strings, ``numaNode`` (the device's
NUMA node, from sysfs; a device without NUMA affinity does not publish it) an int — or, only
where DRAListTypeAttributes is on, a list of ints (the node first, then the same socket's).

:func:`reads` finds the literal reads of those names, ``device.attributes['resource.kubernetes.io']
.numaNode`` (either quote); ``fleet.cel.selectors.standard_misuses`` type-checks the selector
once more with each read replaced by a variable of the name's type and reports what fails there
at the user's position. A read inside ``has()``, through ``.?`` or ``[?``, an alias or a
computed domain keeps ``dyn``: a misuse may pass, a correct selector is never refused.
"""

from __future__ import annotations

import dataclasses

from fleet.cel.references import Token

DOMAIN = "resource.kubernetes.io"
TYPES: dict[str, str] = {"pciBusID": "string", "pcieRoot": "string", "numaNode": "int"}
"""Each standard attribute's CEL type (``deviceattribute/attribute.go``, v0.37.2)."""
LISTABLE = frozenset({"numaNode"})
"""Published as a list of ints instead where DRAListTypeAttributes is on (``deviceattribute/numa_linux.go``)."""
EXAMPLES: dict[str, str] = {"pciBusID": "'0000:3b:00.0'", "pcieRoot": "'pci0000:30'", "numaNode": "0"}


@dataclasses.dataclass(frozen=True)
class Read:
    """A literal read of a standard attribute: ``name`` over ``start:end`` of the expression."""

    name: str
    start: int
    end: int

    @property
    def variable(self) -> str:
        """The typed variable the read becomes for the check (a name no selector writes)."""
        return variable(self.name)


def variable(name: str) -> str:
    return f"__standard_{name}"


def _string_value(token: Token) -> str | None:
    text = token.text
    if token.kind != "string" or len(text) < 2 or text[0] not in "'\"" or text[-1] != text[0] or "\\" in text:
        return None
    return text[1:-1]


def reads(tokens: list[Token], *, lists: bool = False) -> list[Read]:
    """Every ``device.attributes['resource.kubernetes.io'].<name>`` whose type is fixed.

    ``lists``: DRAListTypeAttributes is on, so numaNode's is not."""
    found = []
    for index in range(len(tokens) - 7):
        window = [token.text for token in tokens[index : index + 8]]
        if window[:4] != ["device", ".", "attributes", "["] or window[5:7] != ["]", "."]:
            continue
        name = tokens[index + 7]
        if _string_value(tokens[index + 4]) != DOMAIN or name.kind != "ident" or name.text not in TYPES:
            continue
        if lists and name.text in LISTABLE:
            continue
        before = [token.text for token in tokens[max(index - 2, 0) : index]]
        if before[-1:] in (["."], [".?"]) or before == ["has", "("]:
            continue  # a field named device, or a presence test
        found.append(Read(name.text, tokens[index].offset, name.offset + len(name.text)))
    return found


def describe(names: set[str]) -> str:
    """``resource.kubernetes.io/numaNode is an int`` (and the others), for a message."""
    return "; ".join(
        f"{DOMAIN}/{name} is {'an' if TYPES[name] == 'int' else 'a'} {TYPES[name]}" for name in sorted(names)
    )


def example(names: set[str]) -> str:
    """A correct use of each name, for a hint."""
    return ", ".join(f"device.attributes['{DOMAIN}'].{name} == {EXAMPLES[name]}" for name in sorted(names))


__all__ = ["DOMAIN", "EXAMPLES", "LISTABLE", "TYPES", "Read", "describe", "example", "reads", "variable"]
