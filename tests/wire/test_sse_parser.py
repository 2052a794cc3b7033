"""The wire's incremental SSE parser: the WHATWG event-stream rules, whatever the chunking."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_actors._wire.http.wire import SseParser, SseTooLarge

# Field values without line breaks (and data without a leading space, which the rules strip).
_VALUE = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=30)
_DATA = _VALUE.filter(lambda v: not v.startswith(" "))
_EVENTS = st.lists(
    st.tuples(st.sampled_from(["", "message", "other"]), st.lists(_DATA, min_size=1, max_size=3)),
    max_size=6,
)


def encode(events: list[tuple[str, list[str]]], newline: str) -> bytes:
    out = [": a comment\n"]
    for name, lines in events:
        if name:
            out.append(f"event: {name}\n")
        out += [f"data: {line}\n" for line in lines]
        out.append("\n")
    return "".join(out).replace("\n", newline).encode()


def parse(chunks: list[bytes], limit: int = 1 << 20) -> list[tuple[str, bytes]]:
    parser = SseParser(limit)
    events = [event for chunk in chunks for event in parser.feed(chunk)]
    return events + parser.close()


@given(events=_EVENTS, newline=st.sampled_from(["\n", "\r\n", "\r"]), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_any_chunking_and_line_ending_gives_the_same_events(
    events: list[tuple[str, list[str]]], newline: str, cuts: list[int]
) -> None:
    """However the stream is cut into chunks, and whichever line ending it uses, the events are the same."""
    stream = encode(events, newline)
    points = sorted({min(c, len(stream)) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    expected = [(name or "message", "\n".join(lines).encode()) for name, lines in events]
    assert parse(chunks) == expected


def test_fields_comments_id_and_retry() -> None:
    """data lines join with LF, comments are skipped, the last id and retry are remembered, unknown fields ignored."""
    parser = SseParser(1 << 20)
    stream = b": keep-alive\r\nid: 41\r\nretry: 2500\r\nfoo: bar\r\ndata:{\r\ndata: 1}\r\n\r\nid: 42\r\ndata\r\n\r\n"
    assert parser.feed(stream) == [("message", b"{\n1}"), ("message", b"")]
    assert parser.last_id == "42" and parser.retry_ms == 2500


def test_a_priming_event_without_data_is_not_an_event() -> None:
    """An event with an id and no data lines (a priming event) yields nothing but its id."""
    parser = SseParser(1 << 20)
    assert parser.feed(b"id: p-1\n\n") == []
    assert parser.last_id == "p-1"


def test_the_end_of_stream_keeps_a_complete_event_only() -> None:
    """At the end, an event whose empty line came (even as a lone CR) counts; one without it is dropped."""
    assert parse([b"data: a\r\r"]) == [("message", b"a")]
    assert parse([b"data: a\n\ndata: b"]) == [("message", b"a")]


@pytest.mark.parametrize("chunks", [[b"data: " + b"x" * 200 + b"\n"], [b"data: " + b"x" * 60] * 4])
def test_an_event_over_the_limit_raises(chunks: list[bytes]) -> None:
    """An event (or a line still unterminated) larger than the limit raises SseTooLarge naming it."""
    with pytest.raises(SseTooLarge, match="exceeds 100 bytes"):
        parse(chunks, limit=100)


def test_a_big_message_in_many_chunks_arrives_whole() -> None:
    """A 20 MB data line in 64 KiB chunks is one event with every byte."""
    payload = b"y" * (20 * 1024 * 1024)
    stream = b"data: " + payload + b"\n\n"
    chunks = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]
    [(name, data)] = parse(chunks, limit=64 * 1024 * 1024)
    assert name == "message" and data == payload
