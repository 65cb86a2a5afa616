"""The f-stream (`f`): per-file records, each {char recType; char recFlag; i16 recSize; u32 id}.

recType 0 close: + {i64 read, readv, write} bytes [+ ops (48 bytes) if flag & 2] [+ ssq if flag & 4]
        1 open:  + i64 file size at open [+ {u32 user dictid; lfn, NUL-terminated} if flag & 1]
        2 time:  + {i32 tBeg; i32 tEnd; i64 sID} (the id field holds the record counts); tBeg is the
                 time of the records after it, tEnd when the packet was sent
        3 xfr:   + {i64 read, readv, write} so far (an open file's progress)
        4 disc:  (the id is the user's dictid) a client session ended
The id of the other records is the file's dictid (the `d` map's and the trace's).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ingest.xrootd_monitoring.header import BadDatagram, Header

_REC = struct.Struct(">bbhI")
_I64 = struct.Struct(">q")
_XFR = struct.Struct(">qqq")
_TOD = struct.Struct(">iiq")
_U32 = struct.Struct(">I")
_SID_MASK = (1 << 48) - 1
CLOSE, OPEN, TIME, XFR, DISC = range(5)


@dataclass(slots=True)
class FRecord:
    kind: int  # CLOSE, OPEN, TIME, XFR, DISC
    id: int  # file dictid (user dictid for DISC)
    size: int = 0  # OPEN: file size at open
    user: int = 0  # OPEN: the user's dictid (0: none)
    lfn: str = ""  # OPEN: the path, when `lfn` is configured
    read: int = 0  # CLOSE/XFR: bytes by read() + readv()
    write: int = 0
    forced: bool = False  # CLOSE: closed by a disconnect
    tbeg: int = 0  # TIME
    tend: int = 0
    sid: int = 0


def decode(data: bytes, head: Header) -> list[FRecord]:
    """The records of one f-stream datagram; a record that runs past the datagram ends it (raised:
    the datagram was cut)."""
    out: list[FRecord] = []
    off, end = 8, head.plen
    while off < end:
        if off + 8 > end:
            raise BadDatagram("truncated", f"f-stream record header cut at byte {off} of {end}")
        rtype, flag, size, rid = _REC.unpack_from(data, off)
        if size < 8 or off + size > end:
            raise BadDatagram("truncated" if size >= 8 else "garbage",
                              f"f-stream record of {size} bytes at byte {off} of {end}")
        body = off + 8
        if rtype == TIME:
            if size < 24:
                raise BadDatagram("garbage", f"f-stream time record of {size} bytes")
            tbeg, tend, sid = _TOD.unpack_from(data, body)
            out.append(FRecord(TIME, 0, tbeg=tbeg, tend=tend, sid=sid & _SID_MASK))
        elif rtype == OPEN:
            if size < 16:
                raise BadDatagram("garbage", f"f-stream open record of {size} bytes")
            (fsz,) = _I64.unpack_from(data, body)
            user, lfn = 0, ""
            if flag & 0x01 and size >= 20:
                (user,) = _U32.unpack_from(data, body + 8)
                lfn = data[body + 12:off + size].split(b"\0", 1)[0].decode("utf-8", "replace")
            out.append(FRecord(OPEN, rid, size=max(fsz, 0), user=user, lfn=lfn))
        elif rtype in (CLOSE, XFR):
            if size < 32:
                raise BadDatagram("garbage", f"f-stream {'close' if rtype == CLOSE else 'xfr'} record of {size} bytes")
            read, readv, write = _XFR.unpack_from(data, body)
            out.append(FRecord(rtype, rid, read=max(read, 0) + max(readv, 0), write=max(write, 0),
                               forced=rtype == CLOSE and bool(flag & 0x01)))
        elif rtype == DISC:
            out.append(FRecord(DISC, rid))
        # other record types (newer servers) are skipped by their size
        off += size
    return out
