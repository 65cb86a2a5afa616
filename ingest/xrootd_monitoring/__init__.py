"""XRootD's UDP monitoring, decoded as it is sent (XRootD 5.x, XrdXrootdMonData.hh), into AccessEvents.

One module per stream kind, each a pure decoder of one datagram (bytes in, records out; a bad
datagram raises `header.BadDatagram` with its reason):

* `header`   the 8-byte header every binary datagram starts with ({code, pseq, plen, stod}) and
             the sorting of a datagram into its stream kind (binary or a JSON text packet);
* `gstream`  the g-stream: the pfc (XrdPfc, provider `C`) records after a 24-byte binary header,
             or after a JSON header line (`xrootd.mongstream pfc ... send json insthdr`);
* `ident`    the server ident (`=`, binary map record or JSON): host, port, site, program, version;
* `maps`     the user (`u`) and path (`d`) dictionary records, and the other map codes;
* `fstream`  the f-stream (`f`): time, open (file size, lfn, user), close (bytes read), xfr, disc;
* `tstream`  the I/O trace (`t`): reads per file dictid, opens, closes, disconnects, time windows.

`assemble.Assembler` keeps one stream state per server (sender address + start time `stod`; a
restart is a new stream), counts packet-sequence gaps per stream kind, and turns records into
AccessEvents; `receiver.Receiver` is the UDP socket and its receiving thread.

Which stream wins: a server that sends a pfc g-stream is a cache, and its accesses are the
g-stream's records, through the same parser and enrichment as `cachescope parse --format
xrootd-gstream`; its f-stream and trace are then not turned into accesses (a cache sends both:
one access is never counted twice). A server without a g-stream (a storage element) gets its
accesses from the f-stream: one per open/close, bytes the larger of the close's read + readv and
the trace's read bytes for that file (5.5 f-stream closes leave out pgread).
"""
