"""Start a private neurond for an example if none is reachable (NEURON_SOCKET unset
or dead). The binary: $NEURON_DAEMON, else <repo>/build/daemon/neurond, else PATH."""
import atexit
import os
import shutil
import socket
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _alive(path):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(path)
        s.close()
        return True
    except OSError:
        return False


def ensure_daemon(hbm_mib=8192, cores=2):
    sock = os.environ.get("NEURON_SOCKET")
    if sock and _alive(sock):
        return sock
    binary = os.environ.get("NEURON_DAEMON") or os.path.join(REPO, "build", "daemon", "neurond")
    if not os.access(binary, os.X_OK):
        binary = shutil.which("neurond")
    if not binary:
        raise SystemExit("neurond not found: build the stack (meson setup build && ninja -C build) or set NEURON_DAEMON")
    d = tempfile.mkdtemp(prefix="neurond-example-")
    sock = os.path.join(d, "neurond.sock")
    p = subprocess.Popen([binary, "--socket", sock, "--cores", str(cores), "--hbm-mib", str(hbm_mib)],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "log"), "w"))
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)

    def stop():
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
        shutil.rmtree(d, ignore_errors=True)

    atexit.register(stop)
    os.environ["NEURON_SOCKET"] = sock
    return sock
