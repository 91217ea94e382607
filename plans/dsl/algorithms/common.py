# SPDX-License-Identifier: MIT
# Conventions the algorithms share: where a sender's data lands in a receiver's scratch, and
# which peers a rank sends to first.


def slot(sender, receiver):
    """Compact scratch slots: one per peer, none for the receiver itself."""
    return sender - (sender > receiver)


def ring_order(r, ranks):
    """The other ranks from r + 1 on (mod n): at any moment the ranks write to different peers
    instead of all to the lowest one."""
    n = len(ranks)
    return [ranks[(r + k) % n] for k in range(1, n)]


def memory_channels(p, r):
    """{peer: channel} from rank r to every other rank of its node, peers ascending."""
    node = p.node_of(r)
    return {q: p.channel(r, q, "memory") for q in range(p.nranks)
            if q != r and p.node_of(q) == node}


def block_channels(p, r, peers, blocks):
    """{peer id: channel} from rank r to each of `peers`, one memory channel per block (blocks
    that share a counting semaphore could not tell whose signal they got)."""
    return {q.id: p.channels(r.id, q.id, "memory", blocks) for q in peers}


def sync_all(ch, peers, tbs):
    """Signal every peer, then wait for every peer: past it, each peer has reached the same
    point of the same call."""
    for q in peers:
        ch[q.id].signal(tbs)
    for q in peers:
        ch[q.id].wait(tbs)


def root_channels(p, root, blocks):
    """(peers in ring order from root, {peer: channels root -> peer}, {peer: channels peer ->
    root}), one memory channel per block each way: the star a rooted collective runs on."""
    peers = ring_order(root, p.ranks)
    down = {q.id: p.channels(root, q.id, "memory", blocks) for q in peers}
    up = {q.id: p.channels(q.id, root, "memory", blocks) for q in peers}
    return peers, down, up
