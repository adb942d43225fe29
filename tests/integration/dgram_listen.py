#!/usr/bin/env python3
"""dgram_listen.py SOCKET OUT: binds a UNIX datagram socket at SOCKET (as systemd's
NOTIFY_SOCKET or syslog's /dev/log would be) and appends every datagram it gets to
OUT, one line per message with newlines inside a message shown as '|'. Runs until
killed; OUT is flushed after every message so a test can poll it."""
import os
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
try:
    os.unlink(path)
except FileNotFoundError:
    pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
with open(out, "a", buffering=1) as f:
    while True:
        data = s.recv(65536)
        f.write(data.decode("utf-8", "replace").rstrip("\n").replace("\n", "|") + "\n")
