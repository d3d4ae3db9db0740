"""A fault-injecting TCP proxy in front of one node's raft transport.

Node i advertises P_i (in every node's --peers) and listens on B_i
(--raft-bind). RaftProxy(i, P_i, B_i) accepts on P_i and forwards to B_i.

libraft's TCP transport (uv_tcp_connect.c, uvTcpEncodeHandshake, 0.15) opens
every connection with a handshake, all little-endian:
    u64 protocol version (1)
    u64 sender server id
    u64 address length L (strlen(address)+1, padded up to a multiple of 8)
    L bytes: the sender's advertised raft address, NUL-terminated, zero padded
The connection is one-way (the dialer sends messages; replies travel on the
receiver's own connection to the dialer), so node i's traffic is:
    into i:     connections accepted by proxy_i (any sender)
    out of i:   connections into the other proxies whose handshake says i.

isolate(n): drop existing and refuse new connections into proxy_n, and every
connection whose handshake names sender n (on all proxies: the Cluster calls
isolate on each). heal(): accept everything again.
"""

import socket
import struct
import threading
import time

HANDSHAKE_VERSION = 1
HEADER = struct.Struct("<QQQ")
MAX_ADDR = 4096


def encode_handshake(sender_id, address, version=HANDSHAKE_VERSION):
    """What libraft sends first (used by the tests' fake peers)."""
    raw = address.encode() + b"\0"
    padded = (len(raw) + 7) // 8 * 8
    return HEADER.pack(version, sender_id, padded) + raw.ljust(padded, b"\0")


def _recv_exact(sock, n, deadline):
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("handshake timeout")
        sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed during handshake")
        buf += chunk
    return buf


def read_handshake(sock, timeout=5.0):
    """Reads the handshake: (raw bytes, version, sender id, address)."""
    deadline = time.monotonic() + timeout
    head = _recv_exact(sock, HEADER.size, deadline)
    version, sender, alen = HEADER.unpack(head)
    if version != HANDSHAKE_VERSION or alen > MAX_ADDR:
        return head, version, None, None
    body = _recv_exact(sock, alen, deadline)
    addr = body.split(b"\0", 1)[0].decode("utf-8", "replace")
    return head + body, version, sender, addr


class _Link:
    def __init__(self, down, up, sender):
        self.down, self.up, self.sender = down, up, sender
        self.closed = False
        self.bytes = [0, 0]

    def close(self):
        if self.closed:
            return
        self.closed = True
        for sk in (self.down, self.up):
            if sk is None:
                continue
            try:
                sk.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                sk.close()
            except OSError:
                pass


class RaftProxy:
    def __init__(self, node_id, listen_port, target_port, host="127.0.0.1", log=None):
        self.node_id = node_id
        self.host = host
        self.listen_port = listen_port
        self.target_port = target_port
        self.log = log or (lambda text: None)
        self.isolated = set()
        self.links = []
        self.lock = threading.Lock()
        self.stats = {"accepted": 0, "refused": 0, "dropped": 0, "bad_handshake": 0,
                      "senders": {}}
        self.sock = None
        self.closing = False

    def start(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((self.host, self.listen_port))
        self.listen_port = self.sock.getsockname()[1]
        self.sock.listen(64)
        threading.Thread(target=self._accept_loop, daemon=True,
                         name="proxy-%d" % self.node_id).start()
        return self

    def close(self):
        self.closing = True
        try:
            self.sock.close()
        except OSError:
            pass
        with self.lock:
            links = list(self.links)
            self.links.clear()
        for link in links:
            link.close()

    # -- faults
    def _blocked(self, sender):
        return self.node_id in self.isolated or (sender is not None and sender in self.isolated)

    def isolate(self, node_id):
        with self.lock:
            self.isolated.add(node_id)
            victims = [l for l in self.links if self._blocked(l.sender)]
            self.links = [l for l in self.links if l not in victims]
            self.stats["dropped"] += len(victims)
        for link in victims:
            link.close()
        if victims:
            self.log("proxy %d: isolate %d dropped %d connection(s)"
                     % (self.node_id, node_id, len(victims)))

    def heal(self):
        with self.lock:
            self.isolated.clear()

    def senders(self):
        with self.lock:
            return sorted({l.sender for l in self.links if not l.closed and l.sender is not None})

    # -- plumbing
    def _accept_loop(self):
        while not self.closing:
            try:
                down, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(down,), daemon=True).start()

    def _serve(self, down):
        try:
            raw, version, sender, addr = read_handshake(down)
        except (OSError, ConnectionError):
            try:
                down.close()
            except OSError:
                pass
            return
        with self.lock:
            if sender is None:
                self.stats["bad_handshake"] += 1
            else:
                self.stats["senders"][sender] = self.stats["senders"].get(sender, 0) + 1
            blocked = self._blocked(sender)
            if blocked:
                self.stats["refused"] += 1
        if blocked:
            try:
                down.close()
            except OSError:
                pass
            return
        try:
            up = socket.create_connection((self.host, self.target_port), timeout=2.0)
            up.settimeout(None)
            down.settimeout(None)
            up.sendall(raw)
        except OSError:
            try:
                down.close()
            except OSError:
                pass
            return
        link = _Link(down, up, sender)
        with self.lock:
            if self._blocked(sender) or self.closing:
                link.close()
                return
            self.links.append(link)
            self.stats["accepted"] += 1
        threading.Thread(target=self._pump, args=(link, down, up, 0), daemon=True).start()
        self._pump(link, up, down, 1)

    def _pump(self, link, src, dst, direction):
        try:
            while not link.closed:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                link.bytes[direction] += len(data)
        except OSError:
            pass
        link.close()
        with self.lock:
            if link in self.links:
                self.links.remove(link)
