#!/usr/bin/env python3
"""Writes the seeds of spec/fuzz/h2_glue_fuzz.c (its step format is
described there) into corpus/h2_glue/: real exchanges through the glue,
h2 and HTTP/1.1 origins, bodies, trailers, resets, GOAWAY, CONTINUATION,
padding, 1xx. Run it again after changing the format:
    python3 spec/fuzz/h2_glue_seeds.py"""

import os
import struct

OPT_H2, OPT_HOOKS, OPT_REQ_BODY, OPT_RESP_BODY = 0x01, 0x02, 0x04, 0x08
OPT_BIG_MAX, OPT_NO_MAGIC, OPT_EDITS = 0x10, 0x20, 0x40
CLIENT, ORIGIN, H1A, H1B = 0, 1, 2, 3
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY = 0x1, 0x1, 0x4, 0x8, 0x20
DATA, HEADERS, PRIO, RST, SETTINGS, PING, GOAWAY, WINUP, CONT = 0, 1, 2, 3, 4, 6, 7, 8, 9


def tag(who, op, rounds=1, sub=0):
    return bytes([who | op << 2 | sub << 4 | (rounds - 1) << 6])


def raw(who, b, rounds=1):
    out = b""
    while True:
        out += tag(who, 0, rounds) + bytes([min(len(b), 255)]) + b[:255]
        b = b[255:]
        if not b:
            return out


def frame(who, typ, flags, sid, payload=b"", rounds=1):
    assert len(payload) < 256
    return tag(who, 1, rounds) + bytes([typ, flags, sid, len(payload)]) + payload


def headers(who, sid, fields, flags=0, rounds=2):
    out = tag(who, 2, rounds) + bytes([flags, sid, len(fields)])
    for n, v in fields:
        out += bytes([len(n)]) + n.encode() + bytes([len(v)]) + v.encode()
    return out


def bulk(who, sid, frames, flags=0):
    return tag(who, 3, 1, 0) + bytes([sid, flags, frames])


def half_close(who):
    return tag(who, 3, 1, 1)


def close(who):
    return tag(who, 3, 1, 2)


def pause(who):
    return tag(who, 3, 1, 3)


def settings(who, entries=(), rounds=1):
    return frame(who, SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in entries),
                 rounds)


def winup(who, sid, inc):
    return frame(who, WINUP, 0, sid, struct.pack(">I", inc))


def req(sid, method="GET", path="/", extra=(), end=True, flags=0):
    f = [(":method", method), (":scheme", "https"), (":authority", "o.test"), (":path", path)]
    return headers(CLIENT, sid, f + list(extra), flags | (END_STREAM if end else 0))


def resp(sid, status="200", extra=(), end=False, who=ORIGIN):
    return headers(who, sid, [(":status", status)] + list(extra), END_STREAM if end else 0)


def hello(h2=True):
    s = settings(CLIENT, [(4, 1 << 20)]) + winup(CLIENT, 0, 1 << 20)
    if h2:
        s += settings(ORIGIN, [(3, 100)]) + frame(ORIGIN, SETTINGS, ACK, 0)
    return s + frame(CLIENT, SETTINGS, ACK, 0)


H1_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
H1_CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"

SEEDS = {
    "get_h2": bytes([OPT_H2 | OPT_HOOKS]) + hello() + req(1) +
    resp(1, extra=[("content-length", "5")]) + frame(ORIGIN, DATA, END_STREAM, 1, b"hello"),
    "post_trailers_h2": bytes([OPT_H2 | OPT_HOOKS | OPT_EDITS]) + hello() +
    req(1, "POST", "/up", [("content-type", "application/grpc"), ("te", "trailers")], end=False) +
    frame(CLIENT, DATA, 0, 1, b"abc") +
    headers(CLIENT, 1, [("grpc-timeout", "1S")], END_STREAM) +
    resp(1, extra=[("content-type", "application/grpc")]) + frame(ORIGIN, DATA, 0, 1, b"xyz") +
    headers(ORIGIN, 1, [("grpc-status", "0"), ("grpc-message", "ok")], END_STREAM),
    "get_h1": bytes([OPT_HOOKS]) + hello(False) + req(1) + raw(H1B, H1_OK, 2) + req(3) +
    raw(H1B, H1_OK, 2),
    "post_chunked_h1": bytes([OPT_HOOKS | OPT_EDITS]) + hello(False) +
    req(1, "POST", "/form", end=False) + frame(CLIENT, DATA, 0, 1, b"a=1&b=2") +
    frame(CLIENT, DATA, END_STREAM, 1, b"&c=3", 2) + raw(H1B, H1_CHUNKED, 2),
    "two_h1_parallel": bytes([0]) + hello(False) + req(1, path="/a") + req(3, path="/b") +
    raw(H1A, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close", 2) + close(H1A) +
    raw(H1B, b"HTTP/1.1 100 Continue\r\n\r\n" + H1_OK, 2),
    "rst_h2": bytes([OPT_H2]) + hello() + req(1, "POST", "/slow", end=False) +
    frame(CLIENT, DATA, 0, 1, b"part") + frame(CLIENT, RST, 0, 1, struct.pack(">I", 8), 2) +
    req(3) + frame(ORIGIN, RST, 0, 3, struct.pack(">I", 2), 2),
    "rst_h1": bytes([0]) + hello(False) + req(1, "POST", "/slow", end=False) +
    frame(CLIENT, DATA, 0, 1, b"part") + frame(CLIENT, RST, 0, 1, struct.pack(">I", 8), 2),
    "goaway_h2": bytes([OPT_H2 | OPT_HOOKS]) + hello() + req(1) + req(3) + req(5) +
    frame(ORIGIN, GOAWAY, 0, 0, struct.pack(">II", 3, 0), 2) +
    resp(1, end=True) + frame(ORIGIN, RST, 0, 5, struct.pack(">I", 7), 2) +
    resp(3, extra=[("content-length", "2")]) + frame(ORIGIN, DATA, END_STREAM, 3, b"ok"),
    "client_goaway": bytes([OPT_H2]) + hello() + req(1) +
    frame(CLIENT, GOAWAY, 0, 0, struct.pack(">II", 1, 0)) + resp(1, end=True),
    "big_download_h2": bytes([OPT_H2]) + hello() + req(1) + winup(CLIENT, 1, 1 << 20) +
    resp(1) + bulk(ORIGIN, 1, 12) + pause(CLIENT) + bulk(ORIGIN, 1, 3, END_STREAM) +
    pause(CLIENT),
    "big_upload_h2": bytes([OPT_H2 | OPT_HOOKS | OPT_REQ_BODY]) + hello() +
    req(1, "PUT", "/big", end=False) + bulk(CLIENT, 1, 8) + winup(ORIGIN, 0, 1 << 20) +
    winup(ORIGIN, 1, 1 << 20) + bulk(CLIENT, 1, 2, END_STREAM) + resp(1, end=True),
    "big_download_h1": bytes([OPT_HOOKS | OPT_RESP_BODY | OPT_BIG_MAX]) + hello(False) +
    req(1) + winup(CLIENT, 1, 1 << 20) +
    raw(H1B, b"HTTP/1.1 200 OK\r\nContent-Length: 409600\r\n\r\n") +
    tag(H1B, 2) + bytes([200]) + pause(CLIENT) + tag(H1B, 2) + bytes([200]) + pause(CLIENT),
    "collect_h2": bytes([OPT_H2 | OPT_HOOKS | OPT_REQ_BODY | OPT_RESP_BODY | OPT_EDITS]) +
    hello() + req(1, "POST", "/c", [("content-length", "4")], end=False) +
    frame(CLIENT, DATA, END_STREAM, 1, b"body", 2) + req(3) + req(5) + req(7) +
    req(9, "POST", "/d", end=False) + frame(CLIENT, DATA, END_STREAM, 9, b"to replace", 2) +
    resp(1, extra=[("content-length", "10")]) + frame(ORIGIN, DATA, END_STREAM, 1, b"0123456789") +
    resp(3) + frame(ORIGIN, DATA, 0, 3, b"x" * 100) + frame(ORIGIN, DATA, END_STREAM, 3, b"y"),
    "edits_h1": bytes([OPT_HOOKS | OPT_EDITS | OPT_RESP_BODY]) + hello(False) +
    b"".join(req(s) for s in (1, 3, 5, 7, 9, 11)) + raw(H1B, H1_OK, 2) + raw(H1A, H1_OK, 2) +
    raw(H1B, H1_OK, 2),
    "continuation_padding": bytes([OPT_H2 | OPT_HOOKS]) + hello() +
    headers(CLIENT, 1, [(":method", "GET"), (":scheme", "https"), (":authority", "o.test"),
                        (":path", "/p")], 0x80 | END_STREAM | PADDED | PRIORITY) +
    frame(CLIENT, CONT, END_HEADERS, 1, b"\x00\x03x-a\x01b", 2) +
    headers(ORIGIN, 1, [(":status", "200")], PADDED) +
    frame(ORIGIN, DATA, PADDED | END_STREAM, 1, b"\x02hi\x00\x00"),
    "interim_head": bytes([OPT_H2 | OPT_HOOKS | OPT_RESP_BODY]) + hello() + req(1, "HEAD") +
    resp(1, "103", [("link", "</s.css>; rel=preload")]) +
    resp(1, extra=[("content-length", "1000")], end=True),
    "ping_settings": bytes([OPT_H2]) + hello() + frame(CLIENT, PING, 0, 0, b"12345678") +
    frame(ORIGIN, PING, 0, 0, b"abcdefgh") + settings(CLIENT, [(1, 0), (4, 1000)]) +
    settings(ORIGIN, [(1, 0), (3, 1), (5, 20000)]) +
    frame(CLIENT, PRIO, 0, 3, struct.pack(">IB", 1, 200)) + req(1) + req(3) + resp(1, end=True),
    "connect_refused": bytes([OPT_H2 | OPT_HOOKS]) + hello() +
    headers(CLIENT, 1, [(":method", "CONNECT"), (":authority", "o.test:443")]) +
    headers(CLIENT, 3, [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "https"),
                        (":authority", "o.test"), (":path", "/ws")]) +
    headers(CLIENT, 5, [(":method", "GET"), (":path", "/no-authority"), (":scheme", "https")],
            END_STREAM),
    "origin_gone_h1": bytes([OPT_HOOKS]) + hello(False) + req(1) +
    raw(H1B, b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\npartial") + close(H1B) + req(3) +
    half_close(H1A) + req(5),
    "origin_gone_h2": bytes([OPT_H2]) + hello() + req(1) + resp(1) +
    frame(ORIGIN, DATA, 0, 1, b"part") + close(ORIGIN) + req(3),
    "client_gone": bytes([OPT_H2]) + hello() + req(1) + half_close(CLIENT) + resp(1, end=True) +
    req(3) + close(CLIENT),
}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "h2_glue")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
