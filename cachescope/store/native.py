"""Read ClickHouse's Native format (chdb's output) with clickhouse-driver's column readers.

The embedded store asks chdb for `Native` and decodes it with the very code that decodes the
server's blocks in ClickHouseStore, so both backends return identical Python values (UInt64
above 2^63, DateTime64 microseconds, Enum names, Nullable, Array, Tuple) for the same query.
"""

from __future__ import annotations

from clickhouse_driver import bufferedreader
from clickhouse_driver.connection import ServerInfo
from clickhouse_driver.context import Context
from clickhouse_driver.streams.native import BlockInputStream


class _BytesReader(bufferedreader.BufferedReader):
    """clickhouse-driver's buffered reader over one bytes object."""

    def __init__(self, data: bytes):
        self._pending = data
        super().__init__(max(len(data), 1))

    def read_into_buffer(self):
        if not self._pending:
            raise EOFError("unexpected end of Native data")
        n = len(self._pending)
        self.buffer[:n] = self._pending
        self.current_buffer_size = n
        self._pending = b""

    @property
    def exhausted(self) -> bool:
        return not self._pending and self.position >= self.current_buffer_size


def _context(use_numpy: bool) -> Context:
    ctx = Context()
    # revision 0: the Native *format* has no block info and no custom-serialization flags
    ctx.server_info = ServerInfo("chdb", 0, 0, 0, 0, "UTC", "chdb", 0)
    ctx.settings = {}
    ctx.client_settings = {
        "strings_as_bytes": False,
        "strings_encoding": "utf-8",
        "use_numpy": use_numpy,
        "input_format_null_as_default": False,
        "namedtuple_as_json": False,
        "server_side_params": False,
    }
    return ctx


def decode(data: bytes, use_numpy: bool = False):
    """Native bytes → (names, types, list of per-block column lists)."""
    names: list[str] = []
    types: list[str] = []
    blocks = []
    if not data:
        return names, types, blocks
    reader = _BytesReader(bytes(data))
    stream = BlockInputStream(reader, _context(use_numpy))
    while not reader.exhausted:
        block = stream.read(use_numpy=use_numpy)
        if not names:
            names = [n for n, _ in block.columns_with_types]
            types = [t for _, t in block.columns_with_types]
        if block.num_rows:
            blocks.append(block.get_columns())
    return names, types, blocks
