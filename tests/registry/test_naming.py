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


@given(
    st.dictionaries(
        st.sampled_from(["s1", "s2", "s3", "s4"]),
        st.lists(st.sampled_from(["a", "b", "c", "d.e", "d_e"]), unique=True, max_size=5),
        min_size=1,
    ),
    st.sampled_from(["s1", "s2", "s3", "s4"]),
    st.lists(st.sampled_from(["a", "b", "c", "d.e", "d_e"]), unique=True, max_size=5),
)
def test_a_servers_listing_or_removal_touches_its_own_ids_only(
    listed: dict[str, list[str]], changed: str, relisted: list[str]
) -> None:
    """A server listed again keeps the ids of the tools it still has and drops the rest; a server
    forgotten loses all of its ids; every other server's ids resolve as before (each listing
    and removal walks the server's own ids only)."""
    ids = ToolIdMap()
    before = {server: ids.assign_server(server, server.upper(), tools) for server, tools in listed.items()}
    after = ids.assign_server(changed, changed.upper(), relisted)
    kept = before.get(changed, {})
    assert {name: after[name] for name in relisted if name in kept} == {n: kept[n] for n in relisted if n in kept}
    for name, gone in kept.items():
        if name not in relisted:
            # Dropped: it resolves to nothing, or to a current tool that claimed the freed id
            # (``d.e`` and ``d_e`` clean to one name), never to the tool that is gone.
            assert ids.resolve(gone) in {None} | {(changed, n) for n in relisted if after[n] == gone}
    for server, assigned in before.items():
        if server != changed:
            assert all(ids.resolve(tool_id) == (server, name) for name, tool_id in assigned.items())
    assert len(ids) == sum(len(tools) for server, tools in listed.items() if server != changed) + len(relisted)
    ids.forget_server(changed)
    assert all(ids.resolve(tool_id) is None for tool_id in after.values())
    assert len(ids) == sum(len(tools) for server, tools in listed.items() if server != changed)
