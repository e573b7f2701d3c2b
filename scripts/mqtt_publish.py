#!/usr/bin/env python3
"""Publishes each line of a file as one MQTT message (QoS 1), then an empty message (which
ends the topic for vigil), and returns once the broker has acknowledged every one.

A minimal MQTT 3.1.1 client over a socket, for scripts/live-bench.sh: `mosquitto_pub -l` can
leave its last lines unsent when its input ends, and a benchmark's publisher must be faster
than what it measures.
    mqtt_publish.py PORT TOPIC FILE
"""
import socket
import struct
import sys


def remaining(n):
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def packet(kind, body):
    return bytes([kind]) + remaining(len(body)) + body


def string(s):
    return struct.pack(">H", len(s)) + s


def main():
    port, topic, path = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
    with open(path, "rb") as f:
        messages = [line.rstrip(b"\n") for line in f]
    messages.append(b"")
    sock = socket.create_connection(("127.0.0.1", port))
    client = b"bench-%d" % (id(sock) % 100000)
    connect = string(b"MQTT") + bytes([4, 0x02]) + struct.pack(">H", 60) + string(client)
    sock.sendall(packet(0x10, connect))
    assert sock.recv(4)[:1] == b"\x20", "no CONNACK"
    # Every publication goes out at once (a QoS 1 publisher need not wait for acknowledgements
    # before the next), each with a packet id; then the acknowledgements are counted.
    chunk = bytearray()
    for k, m in enumerate(messages):
        pid = k % 65535 + 1
        chunk += packet(0x32, string(topic) + struct.pack(">H", pid) + m)
        if len(chunk) > 1 << 20:
            sock.sendall(chunk)
            chunk = bytearray()
    sock.sendall(chunk)
    acked, buf = 0, b""
    while acked < len(messages):
        data = sock.recv(1 << 16)
        if not data:
            sys.exit(f"the broker closed the connection after {acked} acknowledgements")
        buf += data
        whole = len(buf) // 4 * 4
        acked += whole // 4  # PUBACK: 0x40 0x02 id id
        buf = buf[whole:]
    sock.sendall(b"\xe0\x00")  # DISCONNECT
    sock.close()


main()
