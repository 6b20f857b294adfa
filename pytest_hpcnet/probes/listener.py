"""Reachability listener, run on the TARGET node with its own `python3` (stdlib only).

Binds the given TCP and UDP ports on one address, accepts (and closes) TCP connections
and echoes UDP datagrams. Prints, flushing each line:

    BUSY tcp:22            a port already bound by another process (e.g. sshd): it is
                           open by an existing service, not an error
    FAILED tcp:80 <why>    a port that could not be bound for another reason
    READY tcp:5000,5001 udp:6000        once every bindable port is listening
    EXIT lifetime|idle served=N         when it stops

It exits by itself after `--lifetime` seconds, or after `--idle` seconds without any
connection or datagram (once READY). Kept compatible with Python 3.6 (no annotations,
no `from __future__`), since it runs on whatever `python3` the node has. Usage:

    python3 listener.py --address 0.0.0.0 --tcp 22,5000 --udp 6000 --lifetime 30 --idle 10
"""

import argparse
import errno
import select
import socket
import sys
import time


def _ports(text):
    return [int(p) for p in text.split(",") if p.strip()] if text else []


def _family(address):
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def _bind(proto, address, port):
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    sock = socket.socket(_family(address), kind)
    try:
        if proto == "tcp":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        if proto == "tcp":
            sock.listen(64)
        sock.setblocking(False)
        return sock
    except OSError:
        sock.close()
        raise


def _say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description="hpcnet reachability listener")
    parser.add_argument("--address", default="0.0.0.0")
    parser.add_argument("--tcp", default="")
    parser.add_argument("--udp", default="")
    parser.add_argument("--lifetime", type=float, default=30.0)
    parser.add_argument("--idle", type=float, default=0.0, help="0: no idle limit")
    args = parser.parse_args(argv)

    sockets = {}
    bound = {"tcp": [], "udp": []}
    for proto, ports in (("tcp", _ports(args.tcp)), ("udp", _ports(args.udp))):
        for port in ports:
            try:
                sockets[_bind(proto, args.address, port)] = proto
                bound[proto].append(str(port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    _say(f"BUSY {proto}:{port}")
                else:
                    _say(f"FAILED {proto}:{port} {exc.strerror or exc}")
    _say(f"READY tcp:{','.join(bound['tcp'])} udp:{','.join(bound['udp'])}")

    start = last = time.monotonic()
    served = 0
    reason = "lifetime"
    while True:
        now = time.monotonic()
        left = args.lifetime - (now - start)
        if args.idle > 0:
            if now - last >= args.idle:
                reason = "idle"
                break
            left = min(left, args.idle - (now - last))
        if left <= 0:
            break
        if not sockets:
            time.sleep(min(left, 0.5))
            continue
        readable, _, _ = select.select(list(sockets), [], [], min(left, 0.5))
        for sock in readable:
            try:
                if sockets[sock] == "tcp":
                    conn, _peer = sock.accept()
                    conn.close()
                else:
                    data, peer = sock.recvfrom(65535)
                    sock.sendto(data, peer)
                served += 1
                last = time.monotonic()
            except OSError:
                pass
    for sock in sockets:
        sock.close()
    _say(f"EXIT {reason} served={served}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
