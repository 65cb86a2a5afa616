"""The Kafka message of topic `cachescope.events`: many AccessEvents of one cache group.

`{"cache_group": G, "events": [AccessEvent, …]}` as JSON, cache_group first so consumers can
key a message without decoding all of it (PyFlink's KafkaSource hands over only the value).
"""

from __future__ import annotations

from typing import Iterable, Mapping

import orjson

_PREFIX = b'{"cache_group":'


def encode_batch(cache_group: str, events: Iterable[Mapping]) -> bytes:
    return _PREFIX + orjson.dumps(cache_group) + b',"events":' + orjson.dumps(list(events)) + b"}"


def decode_batch(message: bytes | str) -> tuple[str, list[dict]]:
    doc = orjson.loads(message)
    if not isinstance(doc, dict) or not isinstance(doc.get("events"), list):
        raise ValueError('message is not {"cache_group": …, "events": […]}')
    return str(doc.get("cache_group", "")), doc["events"]


def cache_group_of(message: bytes | str) -> str:
    """The cache group, read from the head of the message (full decode only as a fallback)."""
    raw = message.encode() if isinstance(message, str) else message
    if raw.startswith(_PREFIX):
        end = raw.find(b'","events":', len(_PREFIX))
        if end > 0 and b"\\" not in raw[len(_PREFIX):end]:
            return raw[len(_PREFIX) + 1:end].decode()
    return decode_batch(raw)[0]
