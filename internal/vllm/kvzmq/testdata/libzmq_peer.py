#!/usr/bin/env python3
"""A libzmq peer for kvzmq's interoperability test (pyzmq + msgpack, Debian's
python3-zmq and python3-msgpack). vLLM itself publishes through libzmq, so
this is the transport a real worker uses.

  libzmq_peer.py sub ENDPOINT REPLAY_ENDPOINT TOPIC N
      connect a SUB socket, print the first N messages as JSON lines
      {"topic", "seq", "payload"(decoded msgpack)}, then ask REPLAY_ENDPOINT
      (DEALER, like a vLLM consumer) for everything from seq 0 and print
      {"replay_seq", "payload_len"} per answer (with "replay_topic" when the
      reply has vLLM's topic frame) and {"replay_end": true}.

  libzmq_peer.py router ENDPOINT TOPIC FORMAT N
      bind a ROUTER socket and answer replay requests as vLLM's
      ZmqEventPublisher does, with batches seq start..N-1 (map events in an
      array batch) and the end marker, until stdin closes. FORMAT "topic":
      [id, "", topic, seq, payload], end [id, "", "", END_SEQ, ""] (vLLM
      #45177 on); "legacy": [id, "", seq, payload], end [id, "", END_SEQ, ""].

  libzmq_peer.py pub ENDPOINT TOPIC N
      bind a PUB socket and publish N vLLM-shaped batches (an array batch
      of map events, seq 0..N-1), re-sending until stdin closes, as a worker
      would keep publishing.
"""
import json
import sys
import time

import msgpack
import zmq


def sub(endpoint, replay_endpoint, topic, n):
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.SUBSCRIBE, topic.encode())
    s.connect(endpoint)
    print(json.dumps({"ready": True}), flush=True)
    got = 0
    while got < n:
        frames = s.recv_multipart()
        if len(frames) != 3:
            print(json.dumps({"error": "frames=%d" % len(frames)}), flush=True)
            continue
        t, seq, payload = frames
        print(json.dumps({
            "topic": t.decode(),
            "seq": int.from_bytes(seq, "big"),
            "payload": msgpack.unpackb(payload, raw=False, strict_map_key=False),
        }), flush=True)
        got += 1
    d = ctx.socket(zmq.DEALER)
    d.connect(replay_endpoint)
    d.send_multipart([b"", (0).to_bytes(8, "big")])
    while True:
        frames = d.recv_multipart()
        out = {}
        if len(frames) == 4:
            _, t, seq, payload = frames
            out["replay_topic"] = t.decode()
        else:
            _, seq, payload = frames
        if int.from_bytes(seq, "big", signed=True) == -1:
            print(json.dumps({"replay_end": True}), flush=True)
            break
        out.update({"replay_seq": int.from_bytes(seq, "big"), "payload_len": len(payload)})
        print(json.dumps(out), flush=True)


def batch(i):
    # vLLM's KVEventBatch is array_like: [ts, events, data_parallel_rank];
    # since vLLM #42892 each event is a map tagged by "type".
    return [
        1700000000.0 + i,
        [{
            "type": "BlockStored",
            "block_hashes": [1000 + i],
            "parent_block_hash": None,
            "token_ids": list(range(i, i + 4)),
            "block_size": 4,
            "lora_id": None,
            "medium": "GPU",
            "lora_name": None,
            "extra_keys": [None],
            "group_idx": 0,
            "kv_cache_spec_kind": "full_attention",
        }],
        0,
    ]


def pub(endpoint, topic, n):
    ctx = zmq.Context.instance()
    p = ctx.socket(zmq.PUB)
    p.bind(endpoint)
    print(json.dumps({"endpoint": p.getsockopt(zmq.LAST_ENDPOINT).decode()}), flush=True)
    import select
    while True:
        for i in range(n):
            p.send_multipart([topic.encode(), i.to_bytes(8, "big"), msgpack.packb(batch(i))])
        r, _, _ = select.select([sys.stdin], [], [], 0.05)
        if r and not sys.stdin.readline():
            return


END_SEQ = (-1).to_bytes(8, "big", signed=True)


def router(endpoint, topic, fmt, n):
    ctx = zmq.Context.instance()
    r = ctx.socket(zmq.ROUTER)
    r.bind(endpoint)
    print(json.dumps({"endpoint": r.getsockopt(zmq.LAST_ENDPOINT).decode()}), flush=True)
    import select
    while True:
        if r.poll(50):
            frames = r.recv_multipart()
            if len(frames) != 3:
                continue
            client_id, _, start = frames
            for i in range(int.from_bytes(start, "big"), n):
                seq = i.to_bytes(8, "big")
                payload = msgpack.packb(batch(i))
                if fmt == "topic":
                    r.send_multipart([client_id, b"", topic.encode(), seq, payload])
                else:
                    r.send_multipart([client_id, b"", seq, payload])
            if fmt == "topic":
                r.send_multipart([client_id, b"", b"", END_SEQ, b""])
            else:
                r.send_multipart([client_id, b"", END_SEQ, b""])
        rd, _, _ = select.select([sys.stdin], [], [], 0)
        if rd and not sys.stdin.readline():
            return


if __name__ == "__main__":
    if sys.argv[1] == "sub":
        sub(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif sys.argv[1] == "router":
        router(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        pub(sys.argv[2], sys.argv[3], int(sys.argv[4]))
