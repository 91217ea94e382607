# SPDX-License-Identifier: MIT
# The DSL's program model: a Program of ranks with input/output/scratch buffers split in chunks,
# channels made from (local rank, remote rank, type), and the ops every rank and channel offers.
# Ops are recorded per (rank, thread block) in program order; compile() runs the passes.
import contextlib

from .errors import DslError, caller

LL, SIMPLE = "LL", "Simple"
MEMORY, PORT = "memory", "port"
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall",
               "sendrecv", "test", "custom")
REDUCE_OPS = ("sum", "prod", "max", "min", "avg")
# Packet ops need LL scratch; ops that reduce honour the program's reduce_op.
PACKET_OPS = {"cpkt", "upkt", "ppkt", "rppkt", "repkt", "respkt", "recpkt", "recspkt"}
REDUCE_NAMES = {"re", "res", "rre", "rres", "repkt", "respkt", "recpkt", "recspkt"}
SIGNALS = {"signal", "rlxsignal", "pws", "pwsf"}
WAITS = {"wait", "rlxwait"}


class Ref:
    """A chunk range as an op operand. `remote`: reached through a channel (owner != op rank);
    `pkt`: the op reads or writes it as LL packets (decided by the op, set when it is made)."""
    __slots__ = ("rank", "buf", "index", "size", "remote", "pkt")

    def __init__(self, rank, buf, index, size, remote=False, pkt=False):
        self.rank, self.buf, self.index, self.size = rank, buf, index, size
        self.remote, self.pkt = remote, pkt

    def copy(self, **kw):
        r = Ref(self.rank, self.buf, self.index, self.size, self.remote, self.pkt)
        for k, v in kw.items():
            setattr(r, k, v)
        return r

    def __repr__(self):
        return "%s%d.%s[%d:%d]" % ("remote " if self.remote else "", self.rank, self.buf,
                                   self.index, self.index + self.size)


class Op:
    """One executor op of one thread block (mnemonics of the plan format)."""

    def __init__(self, name, rank, tb, where, ctype=None, chans=(), srcs=(), dsts=(), tbg=None):
        self.name, self.rank, self.tb, self.tbg = name, rank, tb, tbg
        self.where = [where] if isinstance(where, str) else list(where)
        self.ctype = ctype
        self.chans = list(chans)
        self.srcs, self.dsts = list(srcs), list(dsts)
        self.barrier_id = None
        self.nblocks = None
        self.sems = []
        self.pipe = None   # (unit_size, num_chunks) of a pipeline op
        self.body = []     # a pipeline's inner ops

    def clone(self):
        o = Op(self.name, self.rank, self.tb, self.where, self.ctype, self.chans,
               [r.copy() for r in self.srcs], [r.copy() for r in self.dsts], self.tbg)
        o.barrier_id, o.nblocks, o.sems, o.pipe = self.barrier_id, self.nblocks, list(self.sems), \
            self.pipe
        o.body = [b.clone() for b in self.body]
        return o

    def __repr__(self):
        return "%s(%s -> %s)" % (self.name, self.srcs, self.dsts)


class Chunk:
    """chunks [index, index + size) of one buffer of one rank."""

    def __init__(self, buf, index, size):
        self.buffer, self.index, self.size = buf, index, size

    @property
    def rank(self):
        return self.buffer.rank

    @property
    def kind(self):
        return self.buffer.kind

    def ref(self, **kw):
        return Ref(self.buffer.rank, self.buffer.kind, self.index, self.size, **kw)

    def __repr__(self):
        return "rank %d %s[%d:%d]" % (self.rank, self.buffer.name, self.index,
                                      self.index + self.size)


class Buffer:
    """Input ("i"), output ("o") or scratch ("s") of a rank, `chunks` long. A scratch without a
    declared size grows to the highest chunk any op names."""
    NAMES = {"i": "input", "o": "output", "s": "scratch"}

    def __init__(self, rank, kind, chunks):
        self.rank, self.kind, self.chunks = rank, kind, chunks
        self.name = self.NAMES[kind]
        self.used = 0

    def __getitem__(self, k):
        if isinstance(k, slice):
            if k.step not in (None, 1):
                raise DslError(caller(), "chunk slices take no step")
            lo = 0 if k.start is None else k.start
            hi = self.chunks if k.stop is None else k.stop
            if hi is None:
                raise DslError(caller(), "a slice of the scratch needs an end")
        else:
            lo, hi = k, k + 1
        if lo < 0 or hi <= lo or (self.chunks is not None and hi > self.chunks):
            raise DslError(caller(), "chunk out of range: rank %d %s[%d:%d], the buffer has %s "
                           "chunks" % (self.rank, self.name, lo, hi, self.chunks))
        self.used = max(self.used, hi)
        return Chunk(self, lo, hi - lo)


class ThreadBlockGroup:
    """Blocks that share every op: block k of n takes slice k of each range (tbg_info)."""

    def __init__(self, tbs):
        self.tbs = list(tbs)
        if not self.tbs or len(set(self.tbs)) != len(self.tbs):
            raise DslError(caller(), "a thread-block group needs distinct blocks")


def _blocks(tb):
    """[(block, tbg)] an op is emitted on."""
    if isinstance(tb, ThreadBlockGroup):
        n = len(tb.tbs)
        return [(b, (k, n)) for k, b in enumerate(tb.tbs)]
    if isinstance(tb, int) and tb >= 0:
        return [(tb, None)]
    raise DslError(caller(), "tb must be a block number or a ThreadBlockGroup, got %r" % (tb,))


class Semaphore:
    """A device semaphore of one rank: release on one block, acquire on another."""

    def __init__(self, rank, index, init):
        self.rank, self.index, self.init = rank, index, init

    def acquire(self, tb):
        self.rank.program._add(self.rank.id, tb, "sem_acquire", sems=[self])

    def release(self, tb):
        self.rank.program._add(self.rank.id, tb, "sem_release", sems=[self])


def _local(rank, chunk, what, where):
    if not isinstance(chunk, Chunk):
        raise DslError(where, "%s must be a chunk (buffer[index]), got %r" % (what, chunk))
    if chunk.rank != rank:
        raise DslError(where, "%s is %r, not a buffer of rank %d" % (what, chunk, rank))
    return chunk


def _scratch(chunk, what, where):
    if chunk.kind != "s":
        raise DslError(where, "%s must be scratch (packets live there), got %r" % (what, chunk))
    return chunk


class Rank:
    """One rank: its buffers and the ops that touch only its own memory."""

    def __init__(self, program, r, in_chunks, out_chunks, scratch_chunks):
        self.program, self.id = program, r
        self.node = r // program.nranks_per_node
        self.input = Buffer(r, "i", in_chunks)
        self.output = Buffer(r, "o", out_chunks)
        self.scratch = Buffer(r, "s", scratch_chunks)

    def _chk(self, dst, srcs, where):
        _local(self.id, dst, "dst", where)
        for s in srcs:
            _local(self.id, s, "src", where)
            if s.size != dst.size:
                raise DslError(where, "src %r and dst %r differ in size" % (s, dst))

    def copy(self, dst, src, tb):
        w = caller()
        self._chk(dst, [src], w)
        self.program._add(self.id, tb, "copy", srcs=[src.ref()], dsts=[dst.ref()], where=w)

    def copy_packets(self, dst, src, tb):
        """src (plain) -> dst, a scratch range, as packets of this call."""
        w = caller()
        self._chk(dst, [src], w)
        _scratch(dst, "dst", w)
        self.program._add(self.id, tb, "cpkt", srcs=[src.ref()], dsts=[dst.ref(pkt=True)], where=w)

    def unpack_packets(self, dst, src, tb):
        """Packets of this call in scratch range src -> plain dst (waits for each packet)."""
        w = caller()
        self._chk(dst, [src], w)
        _scratch(src, "src", w)
        self.program._add(self.id, tb, "upkt", srcs=[src.ref(pkt=True)], dsts=[dst.ref()], where=w)

    def reduce(self, dst, srcs, tb):
        """dst = srcs[0] op srcs[1] op ... (plain, left to right)."""
        w = caller()
        self._chk(dst, srcs, w)
        if len(srcs) < 1:
            raise DslError(w, "reduce needs sources")
        self.program._add(self.id, tb, "re", srcs=[s.ref() for s in srcs], dsts=[dst.ref()],
                          where=w)

    def reduce_packets(self, dst, src, packets, tb):
        """dst = src op packets[0] op ... : src plain, the packets in this rank's scratch."""
        w = caller()
        self._chk(dst, [src] + list(packets), w)
        for p in packets:
            _scratch(p, "packet source", w)
        if not packets:
            raise DslError(w, "reduce_packets needs packet sources")
        self.program._add(self.id, tb, "repkt",
                          srcs=[src.ref()] + [p.ref(pkt=True) for p in packets],
                          dsts=[dst.ref()], where=w)

    def barrier(self, tbs):
        """All of `tbs` meet: one block is a __syncthreads (nop), several a grid barrier."""
        w = caller()
        tbs = list(tbs)
        if len(tbs) == 1:
            self.program._add(self.id, tbs[0], "nop", where=w)
            return
        bid = self.program._barrier_id(self.id, tuple(tbs))
        for b in tbs:
            op = self.program._add(self.id, b, "barrier", where=w)
            op.barrier_id, op.nblocks = bid, len(tbs)

    def semaphore(self, init=0):
        sems = self.program._sems[self.id]
        s = Semaphore(self, len(sems), init)
        sems.append(s)
        return s


class Channel:
    """A channel of `kind` from `local` to `remote`. The k-th channel of a kind from A to B pairs
    with the k-th one from B to A: a signal on one side is a wait on the other."""

    def __init__(self, program, local, remote, kind, where):
        self.program, self.local, self.remote, self.kind, self.where = \
            program, local, remote, kind, where
        own = [c for c in program.all_channels if c.local == local and c.kind == kind]
        self.index = len(own)  # per (rank, kind), in creation order: the JSON channel id
        self.nth = sum(1 for c in own if c.remote == remote)  # which one to this peer

    def __repr__(self):
        return "%s channel %d->%d" % (self.kind, self.local, self.remote)

    def _op(self, name, tb, srcs=(), dsts=(), where=None):
        # Memory data ops carry their channel too (the block lists it), but emit no channel_ids.
        return self.program._add(self.local, tb, name, ctype=self.kind, chans=self._chans(),
                                 srcs=srcs, dsts=dsts, where=where or caller())

    def _chans(self):
        return [self]

    def _port_only(self, what, w):
        if self.kind != PORT:
            raise DslError(w, "port op '%s' on a %r" % (what, self))

    def _memory_only(self, what, w):
        if self.kind != MEMORY:
            raise DslError(w, "memory-channel op '%s' on a %r (the proxy cannot do it)" %
                           (what, self))

    def _pair(self, dst, src, w, dst_remote=True):
        """Checks a (local src, remote dst) pair, or (remote src, local dst) for get."""
        if dst_remote:
            _local(self.local, src, "src", w)
            _local(self.remote, dst, "dst (on the remote rank)", w)
        else:
            _local(self.remote, src, "src (on the remote rank)", w)
            _local(self.local, dst, "dst", w)
        if src.size != dst.size:
            raise DslError(w, "src %r and dst %r differ in size" % (src, dst))

    def put(self, dst, src, tb):
        """src (local) -> dst (the remote rank's buffer). Port: the proxy copies later; a signal
        after it (same channel) arrives after the data."""
        w = caller()
        self._pair(dst, src, w)
        self._op("put", tb, [src.ref()], [dst.ref(remote=True)], w)

    def get(self, dst, src, tb):
        w = caller()
        self._memory_only("get", w)
        self._pair(dst, src, w, dst_remote=False)
        self._op("get", tb, [src.ref(remote=True)], [dst.ref()], w)

    def signal(self, tb, relaxed=False):
        self._op("rlxsignal" if relaxed else "signal", tb, where=caller())

    def wait(self, tb, relaxed=False):
        self._op("rlxwait" if relaxed else "wait", tb, where=caller())

    def flush(self, tb):
        w = caller()
        self._port_only("flush", w)
        self._op("flush", tb, where=w)

    def put_with_signal(self, dst, src, tb):
        w = caller()
        self._port_only("put_with_signal", w)
        self._pair(dst, src, w)
        self._op("pws", tb, [src.ref()], [dst.ref(remote=True)], w)

    def put_with_signal_and_flush(self, dst, src, tb):
        w = caller()
        self._port_only("put_with_signal_and_flush", w)
        self._pair(dst, src, w)
        self._op("pwsf", tb, [src.ref()], [dst.ref(remote=True)], w)

    def put_packets(self, dst, src, tb):
        """Memory: plain src -> packets in the remote scratch dst. Port: packets already in the
        local scratch src -> the remote scratch dst."""
        w = caller()
        self._pair(dst, src, w)
        _scratch(dst, "dst", w)
        if self.kind == PORT:
            _scratch(src, "src of a port put_packets", w)
        self._op("ppkt", tb, [src.ref(pkt=self.kind == PORT)], [dst.ref(remote=True, pkt=True)],
                 w)

    def read_put_packets(self, dst, src, tb):
        """Forwards packets of this call from the local scratch src to the remote scratch dst
        (waits for each packet first)."""
        w = caller()
        self._pair(dst, src, w)
        _scratch(src, "src", w)
        _scratch(dst, "dst", w)
        self._op("rppkt", tb, [src.ref(pkt=True)], [dst.ref(remote=True, pkt=True)], w)

    def reduce(self, dst, src, remote_srcs, tb):
        """dst = src op remote_srcs[0] op ... , the remote sources read through this channel."""
        w = caller()
        self._memory_only("reduce", w)
        _local(self.local, dst, "dst", w)
        _local(self.local, src, "src", w)
        for s in remote_srcs:
            _local(self.remote, s, "remote src", w)
            if s.size != dst.size:
                raise DslError(w, "src %r and dst %r differ in size" % (s, dst))
        self._op("rre", tb, [src.ref()] + [s.ref(remote=True) for s in remote_srcs], [dst.ref()],
                 w)


class ChannelGroup(Channel):
    """Channels between the same two ranks, one per block of a thread-block group: an op on
    the group runs on block k of the group with channel k."""

    def __init__(self, channels):
        self.channels = channels
        c = channels[0]
        self.program, self.local, self.remote, self.kind, self.where = \
            c.program, c.local, c.remote, c.kind, c.where

    def __repr__(self):
        return "%s channels %d->%d (x%d)" % (self.kind, self.local, self.remote,
                                             len(self.channels))

    def _chans(self):
        return self


class Program:
    """A collective plan for `nranks` ranks. Chunks: allreduce/broadcast have `chunks` input and
    output chunks, allgather `chunks` in and nranks * chunks out, reducescatter the reverse."""

    def __init__(self, name, collective, nranks, *, ranks_per_node=None, protocol=LL,
                 inplace=False, instances=1, min_bytes=0, max_bytes=(1 << 64) - 1, threads=1024,
                 chunks=1, scratch_chunks=None, double_scratch=None, alignment=16, priority=0,
                 reduce_op=None, fuse=True, fuse_port_reduce=True, reuse_resources=False):
        w = caller()
        if collective not in COLLECTIVES:
            raise DslError(w, "unknown collective %r" % collective)
        if protocol not in (LL, SIMPLE):
            raise DslError(w, "protocol must be LL or Simple, got %r" % protocol)
        if reduce_op is not None and reduce_op not in REDUCE_OPS:
            raise DslError(w, "unknown reduce_op %r" % reduce_op)
        self.nranks_per_node = ranks_per_node or nranks
        if nranks % self.nranks_per_node:
            raise DslError(w, "%d ranks do not split into nodes of %d" %
                           (nranks, self.nranks_per_node))
        self.name, self.collective, self.nranks = name, collective, nranks
        self.protocol, self.inplace, self.instances = protocol, inplace, instances
        self.min_bytes, self.max_bytes, self.threads = min_bytes, max_bytes, threads
        self.alignment, self.priority, self.reduce_op = alignment, priority, reduce_op
        self.fuse, self.reuse_resources = fuse, reuse_resources
        # False: a reduction is not fused with the port put of its result (port recspkt); for
        # plans kept identical to ones that ran on GPUs before port recspkt had.
        self.fuse_port_reduce = fuse_port_reduce
        self.double_scratch = protocol == LL if double_scratch is None else double_scratch
        self.chunks = chunks
        ic, oc = chunks, chunks
        if collective == "allgather":
            oc = nranks * chunks
        elif collective == "reducescatter":
            ic = nranks * chunks
        self.all_channels = []
        self._sems = [[] for _ in range(nranks)]
        self._bars = [{} for _ in range(nranks)]
        self.blocks = [dict() for _ in range(nranks)]  # rank -> {tb: [ops]}
        self._pipe = None
        self.ranks = [Rank(self, r, ic, oc, scratch_chunks) for r in range(nranks)]

    # ---- declaration helpers ----
    def rank(self, r):
        return self.ranks[r]

    def node_of(self, r):
        return r // self.nranks_per_node

    def channel(self, local, remote, kind):
        """A new channel from rank `local` to rank `remote` (MEMORY or PORT)."""
        return self._channel(local, remote, kind, caller())

    def _channel(self, local, remote, kind, w):
        if kind not in (MEMORY, PORT):
            raise DslError(w, "channel type must be memory or port, got %r" % (kind,))
        for r in (local, remote):
            if not 0 <= r < self.nranks:
                raise DslError(w, "rank %d out of range [0, %d)" % (r, self.nranks))
        if local == remote:
            raise DslError(w, "a channel cannot connect rank %d to itself" % local)
        if kind == MEMORY and self.node_of(local) != self.node_of(remote):
            raise DslError(w, "memory channel between ranks %d and %d of different nodes (%d "
                           "and %d): use a port channel" % (local, remote, self.node_of(local),
                                                           self.node_of(remote)))
        c = Channel(self, local, remote, kind, w)
        self.all_channels.append(c)
        return c

    def group(self, tbs):
        return ThreadBlockGroup(tbs)

    def channels(self, local, remote, kind, n):
        """n channels from local to remote, one per block of an n-block group: each block then
        signals and waits on its own channel (a counting semaphore cannot tell whose signal it
        got, so blocks must not share one)."""
        w = caller()
        return ChannelGroup([self._channel(local, remote, kind, w) for _ in range(n)])

    @contextlib.contextmanager
    def pipeline(self, unit_size, num_chunks):
        """Ops made inside run as one pipeline op per (rank, block): a loop over slices of
        unit_size bytes of every range (ranges num_chunks chunks long)."""
        w = caller()
        if self._pipe is not None:
            raise DslError(w, "pipelines cannot be nested")
        if unit_size <= 0 or unit_size % self.alignment or num_chunks <= 0:
            raise DslError(w, "pipeline unit_size must be a positive multiple of %d and "
                           "num_chunks positive" % self.alignment)
        self._pipe = {"where": w, "iter": (unit_size, num_chunks), "ops": {}}
        try:
            yield
        finally:
            self._pipe = None

    # ---- recording ----
    def _barrier_id(self, rank, tbs):
        bars = self._bars[rank]
        if tbs not in bars:
            bars[tbs] = len(bars)
        return bars[tbs]

    def _add(self, rank, tb, name, ctype=None, chans=(), srcs=(), dsts=(), where=None,
             sems=()):
        where = where or caller()
        if name in PACKET_OPS and self.protocol != LL:
            raise DslError(where, "packet op '%s' needs protocol LL (this program is %s)" %
                           (name, self.protocol))
        last = None
        placed = _blocks(tb)
        if isinstance(chans, ChannelGroup):
            if len(chans.channels) != len(placed):
                raise DslError(where, "a group of %d channels used on %d blocks: one channel per "
                               "block" % (len(chans.channels), len(placed)))
        for k, (b, tbg) in enumerate(placed):
            cs = [chans.channels[k]] if isinstance(chans, ChannelGroup) else chans
            op = Op(name, rank, b, where, ctype, cs, [r.copy() for r in srcs],
                    [r.copy() for r in dsts], tbg)
            op.sems = list(sems)
            blk = self.blocks[rank].setdefault(b, [])
            if self._pipe is not None:
                key = (rank, b)
                pipe = self._pipe["ops"].get(key)
                if pipe is None:
                    pipe = Op("pipeline", rank, b, self._pipe["where"])
                    pipe.pipe = self._pipe["iter"]
                    self._pipe["ops"][key] = pipe
                    blk.append(pipe)
                pipe.body.append(op)
            else:
                blk.append(op)
            last = op
        return last

    def compile(self):
        """Runs the passes and returns the executor JSON (a dict)."""
        from . import compiler
        return compiler.compile_program(self)
