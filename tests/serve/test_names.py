"""The gateway's names: one name space for every server's tools and prompts, URIs kept unless they collide."""

from __future__ import annotations

import pytest

from mcp_actors.serve import Joined
from mcp_actors.serve._names import NameTable, UriTable, uri_prefix


def test_the_default_naming_joins_server_and_name() -> None:
    """``<server>__<name>``; the server part keeps letters, digits, ``_ - .`` and replaces the rest."""
    naming = Joined()
    assert naming("github", "search") == "github__search"
    assert naming("my files!", "read") == "my_files___read"
    assert naming.split("github__search_code") == ("github", "search_code")
    assert naming.split("plain") is None
    assert Joined("::")("a", "b") == "a::b"
    with pytest.raises(ValueError, match="separator must be a non-empty string"):
        Joined("")


def test_colliding_names_get_a_stable_hash_and_keep_it() -> None:
    """The first claim keeps the plain name; a later colliding one gets a hash suffix; both stay put."""
    table = NameTable(Joined())
    first = table.claim("id-1", "a b", "t")
    second = table.claim("id-2", "a_b", "t")  # cleans to the same server part
    assert first == "a_b__t"
    assert second.startswith("a_b__t_") and second != first
    assert table.resolve(first) == ("id-1", "t") and table.resolve(second) == ("id-2", "t")
    assert table.claim("id-2", "a_b", "t") == second  # the same item: the same name, every time
    table.keep_only(["id-2"])
    assert table.resolve(first) is None and table.resolve(second) == ("id-2", "t")


def test_a_naming_function_decides_and_is_checked() -> None:
    """A function ``(server, name) -> str`` names items; one that returns no usable name is refused."""
    table = NameTable(lambda server, item: f"{item}@{server}")
    assert table.claim("x", "srv", "echo") == "echo@srv"
    bad = NameTable(lambda server, item: "")
    with pytest.raises(ValueError, match="naming function must return a non-empty string"):
        bad.claim("x", "srv", "echo")


def test_a_uri_listed_twice_is_kept_by_the_first_and_prefixed_for_the_next() -> None:
    """The second server's copy is ``<server>+<uri>``, still a URI, and maps back to the original."""
    table = UriTable()
    assert table.claim("b", "beta", "demo://counter") == "demo://counter"
    assert table.claim("g", "Gamma Server", "demo://counter") == "gamma-server+demo://counter"
    assert table.resolve("gamma-server+demo://counter") == ("g", "demo://counter")
    assert table.public("g", "demo://counter") == "gamma-server+demo://counter"
    assert uri_prefix("9lives") == "s9lives"
