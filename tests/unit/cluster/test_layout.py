"""Ports for a new cluster's nodes."""

from __future__ import annotations

from canary.cluster import layout


def test_free_ports_never_hand_out_a_port_a_node_is_about_to_bind() -> None:
    first = layout.free_ports(20)
    again = layout.free_ports(20, avoid=set(first))
    assert len(again) == 20 == len(set(again)) and not set(again) & set(first)
