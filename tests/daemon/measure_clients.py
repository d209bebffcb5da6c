#!/usr/bin/env python3
"""Slow and large clients against a neurond (issue 12, item 1): the figures in the README.

    tests/daemon/measure_clients.py NEUROND NEURONCTL NEURON_LS [--tenants 1500]

Starts NEUROND on a private socket (2 devices x 2 cores, 256 MiB each) and measures:
  1. `neuronctl events -f` while the daemon holds ~1000 events, read by a slow reader
     (its stdout is not read for 3 s, then line by line): lines received, and whether
     the daemon dropped the subscription;
  2. N tenants connected (default 1500): `neuron-ls -j` and `neuron-ls -w` (exit
     status, time, tenants listed, bytes);
  3. a SetPolicy of ~1 MiB (58000 schedule windows), then GetCapacity: whether the
     policy is refused when set and whether GetCapacity still answers.
Raw protocol (neuron.proto) by hand: no Python protobuf needed. Run it against an old
neurond to see what fails there.
"""
import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def frame(payload):
    return len(payload).to_bytes(4, "little") + payload


def parse(buf):
    """Top-level fields of a message: {number: [value, ...]} (bytes for length-delimited)."""
    out, i = {}, 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(num, []).append(v)
    return out


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


class Conn:
    def __init__(self, path, name="measure", observer=False):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        hello = field(1, 1) + field(3, name) + (field(5, 1) if observer else b"")
        r = self.call(field(10, hello))
        if 10 not in r:
            raise RuntimeError("hello refused: %r" % r)

    def call(self, body, rid=1, timeout=30):
        self.s.sendall(frame(field(1, rid) + body))
        return self.receive(timeout)

    def receive(self, timeout=30):
        self.s.settimeout(timeout)
        head = self.recv_exact(4)
        n = int.from_bytes(head, "little")
        self.last_size = n
        if n > 1 << 20:
            raise RuntimeError("reply frame of %d bytes, more than 1 MiB" % n)
        return parse(self.recv_exact(n))

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("neurond closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self):
        self.s.close()


def error_of(r):
    if 2 not in r:
        return None
    e = parse(r[2][0])
    return "code %d: %s" % (e.get(1, [0])[0], e.get(2, [b""])[0].decode(errors="replace"))


def start_daemon(neurond, workdir):
    sock = os.path.join(workdir, "neurond.sock")
    log = open(os.path.join(workdir, "neurond.log"), "w")
    p = subprocess.Popen([neurond, "--socket", sock, "--profile", "trn2", "--devices", "2", "--cores", "2",
                          "--hbm-mib", "256", "--spin-us", "20", "--log-level", "warn"], stdout=log, stderr=log)
    for _ in range(200):
        if os.path.exists(sock):
            try:
                Conn(sock).close()
                return p, sock
            except OSError:
                pass
        time.sleep(0.05)
    raise RuntimeError("neurond did not start")


def measure_events(sock, neuronctl):
    for i in range(600):  # 1200 events: tenant.connect and tenant.exit each
        Conn(sock, "churn-%d" % i).close()
    time.sleep(0.5)
    p = subprocess.Popen([neuronctl, "--socket", sock, "events", "-f"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    time.sleep(3)  # a reader that does not keep up: the pipe and the socket fill
    for i in range(100):  # live events meanwhile
        Conn(sock, "live-%d" % i).close()
    lines, lost, pending = 0, 0, b""
    fd = p.stdout.fileno()
    deadline = time.time() + 30
    import select
    while time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 2.0)
        if not ready:
            break  # quiet for 2 s: everything was delivered
        chunk = os.read(fd, 512)  # slowly: 512 bytes at a time
        if not chunk:
            break
        pending += chunk
        *done, pending = pending.split(b"\n")
        lines += len(done)
        lost += sum(1 for x in done if b"events.lost" in x)
        time.sleep(0.001)
    exited = p.poll()
    p.kill()
    err = p.stderr.read().decode(errors="replace").strip()
    return {"lines": lines, "lost_markers": lost, "neuronctl_exited": exited is not None,
            "stderr": err[-200:]}


def measure_many(sock, neuron_ls, n):
    conns = []
    for i in range(n):
        c = Conn(sock, "tenant-with-a-long-enough-name-to-fill-the-list-%d" % i)
        # 4 KiB of HBM: neuron-ls lists a tenant under the devices it uses.
        r = c.call(field(12, field(1, i % 2) + field(2, 4096)))
        if 12 not in r:
            raise RuntimeError("AllocDevice %d refused: %s" % (i, error_of(r)))
        conns.append(c)
    out = {"tenants": n}
    t0 = time.time()
    r = subprocess.run([neuron_ls, "--socket", sock, "-j"], capture_output=True, text=True)
    out["ls_j_seconds"] = round(time.time() - t0, 3)
    out["ls_j_status"] = r.returncode
    out["ls_j_bytes"] = len(r.stdout)
    try:
        doc = json.loads(r.stdout)
        out["ls_j_processes"] = sum(len(d.get("neuron_processes", [])) for d in doc.get("neuron_devices", doc if isinstance(doc, list) else []))
    except Exception as e:  # noqa: BLE001
        out["ls_j_error"] = (r.stderr.strip() or str(e))[-200:]
    t0 = time.time()
    r = subprocess.run([neuron_ls, "--socket", sock, "-w"], capture_output=True, text=True)
    out["ls_w_seconds"] = round(time.time() - t0, 3)
    out["ls_w_status"] = r.returncode
    out["ls_w_lines"] = r.stdout.count("\n")
    if r.returncode:
        out["ls_w_error"] = r.stderr.strip()[-200:]
    c = Conn(sock, "pager")
    t0 = time.time()
    r = c.call(field(18, b""))
    out["list_tenants_first_reply_bytes"] = c.last_size
    out["list_tenants_first_page"] = len(parse(r[18][0]).get(1, [])) if 18 in r else error_of(r)
    for x in conns:
        x.close()
    return out


def measure_policy(sock):
    window = field(1, "00:00") + field(2, "06:00") + field(3, 1)
    policy = field(1, "scheduled") + field(2, window) * 58000
    body = field(23, field(1, policy))
    c = Conn(sock, "admin")
    out = {"set_policy_bytes": len(body)}
    try:
        r = c.call(body)
        out["set_policy"] = error_of(r) or "accepted"
    except Exception as e:  # noqa: BLE001
        out["set_policy"] = "failed: %s" % e
    try:
        c2 = Conn(sock, "reader")
        r = c2.call(field(20, b""))
        out["get_capacity"] = error_of(r) or "answered, %d bytes" % c2.last_size
    except Exception as e:  # noqa: BLE001
        out["get_capacity"] = "failed: %s" % e
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("neurond")
    ap.add_argument("neuronctl")
    ap.add_argument("neuron_ls")
    ap.add_argument("--tenants", type=int, default=1500)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory(prefix="neurond-measure-") as d:
        p, sock = start_daemon(a.neurond, d)
        try:
            res = {"events_follow": measure_events(sock, a.neuronctl)}
            res["many_tenants"] = measure_many(sock, a.neuron_ls, a.tenants)
            res["large_policy"] = measure_policy(sock)
            res["daemon_alive"] = p.poll() is None
        finally:
            p.terminate()
            p.wait(10)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    sys.exit(main())
