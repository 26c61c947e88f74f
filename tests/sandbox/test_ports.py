"""The sandbox's ports: free, and outside the range the kernel gives outgoing connections.

A component restarted on its port (kube-apiserver in the fault tests) left a port of that range
free for a moment, a client's connection took it, and the restart failed with "address already
in use" (CI, stop 49).
"""

from __future__ import annotations

import socket
from pathlib import Path

from fleet.sandbox import processes


def test_the_ephemeral_range_is_read_from_the_kernel(tmp_path: Path) -> None:
    setting = tmp_path / "ip_local_port_range"
    setting.write_text("40000\t50000\n")
    assert processes.ephemeral_ports(setting) == range(40000, 50001)


def test_an_unreadable_range_falls_back_to_linux_s_default(tmp_path: Path) -> None:
    assert processes.ephemeral_ports(tmp_path / "missing") == range(32768, 61000)
    (tmp_path / "garbled").write_text("auto\n")
    assert processes.ephemeral_ports(tmp_path / "garbled") == range(32768, 61000)


def test_free_ports_lie_outside_the_ephemeral_range_and_can_be_listened_on() -> None:
    ephemeral = processes.ephemeral_ports()
    for _ in range(50):
        port = processes.free_port()
        assert port not in ephemeral
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
            s.listen()
