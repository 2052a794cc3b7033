"""Tool ids: one collision policy for registry ids and direct names, and no two tools ever share an id."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mcp_actors import naming
from mcp_actors.naming import ToolIdMap, claim_name, hash_suffixed


def test_a_hashed_id_that_is_already_taken_is_not_handed_out_twice() -> None:
    """A tool whose plain name equals another's hashed id never makes two tools share one id."""
    ids = ToolIdMap()
    hashed = hash_suffixed(naming.tool_id("a", "t"), "idB", "t")
    taker = ids.assign("idC", "a", hashed.removeprefix("mcp__a__"))
    assert taker == hashed
    first = ids.assign("idA", "a", "t")
    second = ids.assign("idB", "a", "t")
    assert len({taker, first, second}) == 3
    assert ids.resolve(taker) == ("idC", hashed.removeprefix("mcp__a__"))
    assert ids.resolve(second) == ("idB", "t")


def test_claim_name_keeps_a_free_name_and_suffixes_a_taken_one_deterministically() -> None:
    """The first claim keeps the plain name; a later one gets the same hash suffix in every session."""
    assert claim_name("x", set(), "s", "t") == "x"
    suffixed = claim_name("x", {"x"}, "s", "t")
    assert suffixed == hash_suffixed("x", "s", "t") == claim_name("x", {"x"}, "s", "t")
    counted = claim_name("x", {"x", suffixed}, "s", "t")
    assert counted not in {"x", suffixed}
    assert naming.is_provider_safe(counted)


@given(st.lists(st.tuples(st.sampled_from(["s1", "s2", "s3"]), st.text(min_size=1, max_size=80)), max_size=40))
def test_ids_are_unique_provider_safe_and_resolve_back(pairs: list[tuple[str, str]]) -> None:
    """Whatever the tool names, every assigned id is provider-safe, distinct, and resolves to its tool."""
    ids = ToolIdMap()
    assigned = {(server, tool): ids.assign(server, server.upper(), tool) for server, tool in pairs}
    assert len(set(assigned.values())) == len(assigned)
    for (server, tool), tool_id in assigned.items():
        assert naming.is_provider_safe(tool_id)
        assert ids.resolve(tool_id) == (server, tool)
