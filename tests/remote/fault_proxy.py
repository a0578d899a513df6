#!/usr/bin/env python3
"""A fault-injecting HTTP proxy for the remote-model tests.

Forwards GET requests (with their Range header) to an upstream server on
127.0.0.1 and, on every Nth response (--every N) or the first N (--first N),
injects one fault (--fault):

  reset      sends the head and half the body, then resets the connection (RST)
  truncate   sends the head (full Content-Length) and half the body, then closes
  500, 503   answers with that status
  429        answers 429 with Retry-After: 1
  badrange   shifts the Content-Range start by one byte (body unchanged)
  trickle    sends the body in 8 KiB pieces, 5 ms apart
  stall      sends the head and half the body, then goes silent for 60 s
  etag       answers with another ETag (as if the file had changed upstream)
  drop-etag  leaves the ETag header out
  drop-validators  leaves out ETag and Last-Modified
  drip       sends the body one byte every 0.2 s (each byte resets a stall timer)
  oversize   sends a Content-Length 1000 bytes larger than the body, sends the
             body, then keeps the connection open for 60 s
  none       passes everything through

Requests for the first byte (probes, "bytes=0-0") are never faulted, unless
--probes is given, so that a model can be opened. Counts are printed to stderr.
"""
import argparse
import http.client
import http.server
import socket
import struct
import sys
import threading
import time

args = None
lock = threading.Lock()
counter = {"n": 0, "faults": 0}


def should_fault(range_header):
    if args.fault == "none" or (range_header in ("bytes=0-0",) and not args.probes):
        return False
    with lock:
        counter["n"] += 1
        n = counter["n"]
        hit = (args.first and n <= args.first) or (args.every and n % args.every == 0)
        if args.first == 0 and args.every == 0:
            hit = True
        if hit:
            counter["faults"] += 1
        return hit


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def do_GET(self):
        rng = self.headers.get("Range", "")
        up = http.client.HTTPConnection("127.0.0.1", args.upstream, timeout=30)
        hdrs = {"Range": rng} if rng else {}
        if self.headers.get("Authorization"):
            hdrs["Authorization"] = self.headers["Authorization"]
        up.request("GET", self.path, headers=hdrs)
        r = up.getresponse()
        body = r.read()
        up.close()
        fault = args.fault if should_fault(rng) else "none"
        print(f"{self.path} {rng} -> {r.status} {len(body)} fault={fault}", file=sys.stderr, flush=True)
        if fault in ("500", "503", "429"):
            msg = b"injected fault\n"
            self.send_response(int(fault))
            if fault == "429":
                self.send_header("Retry-After", "1")
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        self.send_response(r.status)
        for k, v in r.getheaders():
            kl = k.lower()
            if kl in ("connection", "keep-alive", "transfer-encoding", "server", "date"):
                continue
            if fault == "badrange" and kl == "content-range":
                a, rest = v.split(" ")[1].split("-")
                v = f"bytes {int(a) + 1}-{rest}"
            if fault == "etag" and kl == "etag":
                v = '"changed-upstream"'
            if (fault == "drop-etag" and kl == "etag") or (fault == "drop-validators" and kl in ("etag", "last-modified")):
                continue
            if fault == "oversize" and kl == "content-length":
                v = str(int(v) + 1000)
            self.send_header(k, v)
        self.end_headers()
        half = len(body) // 2
        if fault == "reset":
            self.wfile.write(body[:half])
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if fault == "truncate":
            self.wfile.write(body[:half])
            self.wfile.flush()
            self.close_connection = True
            return
        if fault == "stall":
            self.wfile.write(body[:half])
            self.wfile.flush()
            time.sleep(60)
            self.close_connection = True
            return
        if fault == "drip":
            for i in range(len(body)):
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
                time.sleep(0.2)
            return
        if fault == "oversize":
            self.wfile.write(body)
            self.wfile.flush()
            time.sleep(60)
            self.close_connection = True
            return
        if fault == "trickle":
            for i in range(0, len(body), 8192):
                self.wfile.write(body[i:i + 8192])
                self.wfile.flush()
                time.sleep(0.005)
            return
        self.wfile.write(body)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--upstream", type=int, required=True)
    p.add_argument("--fault", default="none")
    p.add_argument("--every", type=int, default=0)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--probes", action="store_true", help="fault probes (bytes=0-0) too")
    args = p.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    # start_proxy waits for this line: a port that answers may still be an earlier
    # proxy's (or another test's) while this one failed to bind it.
    print(f"listening on 127.0.0.1:{args.port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
