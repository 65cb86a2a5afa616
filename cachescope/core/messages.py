"""The Kafka message of topic `cachescope.events`: many AccessEvents of one cache group.

`{"cache_group": G, "events": [AccessEvent, …]}` as JSON, cache_group first so consumers can
key a message without decoding all of it (PyFlink's KafkaSource hands over only the value).
"""

from __future__ import annotations

from typing import Iterable, Mapping

import msgspec
import orjson

from cachescope.events import AccessEvent

_PREFIX = b'{"cache_group":'


def encode_batch(cache_group: str, events: Iterable[Mapping]) -> bytes:
    return _PREFIX + orjson.dumps(cache_group) + b',"events":' + msgspec.json.encode(list(events)) + b"}"


class _Message(msgspec.Struct):
    cache_group: str
    events: list[AccessEvent]


_decoder = msgspec.json.Decoder(_Message)


def decode_batch(message: bytes | str) -> tuple[str, list[AccessEvent]]:
    """The cache group and the events, validated against the contract (typed decoding: several
    times faster than generic JSON into dicts)."""
    try:
        doc = _decoder.decode(message)
    except msgspec.DecodeError as e:  # ValidationError included
        raise ValueError(f'message is not {{"cache_group": …, "events": [AccessEvent, …]}}: {e}') from None
    return doc.cache_group, doc.events


def cache_group_of(message: bytes | str) -> str:
    """The cache group, read from the head of the message (full decode only as a fallback)."""
    raw = message.encode() if isinstance(message, str) else message
    if raw.startswith(_PREFIX):
        end = raw.find(b'","events":', len(_PREFIX))
        if end > 0 and b"\\" not in raw[len(_PREFIX):end]:
            return raw[len(_PREFIX) + 1:end].decode()
    return decode_batch(raw)[0]
