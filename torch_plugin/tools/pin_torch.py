"""Pins a built torch_neuron wheel to the torch it was built against.

meson-python takes the wheel's dependencies from pyproject.toml, which cannot
know the torch of the build machine; the extension's C++ ABI only matches that
one torch. This adds ``Requires-Dist: torch==<version>`` (read from the wheel's
own torch_neuron/_build_info.py) to the wheel's METADATA and rewrites RECORD
(PEP 376/427 hashes), in place.

    python3 tools/pin_torch.py dist/torch_neuron-*.whl
"""
import base64
import hashlib
import re
import sys
import zipfile


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def built_torch(files):
    info = files.get("torch_neuron/_build_info.py")
    if info is None:
        sys.exit("pin_torch: the wheel has no torch_neuron/_build_info.py (not a torch_neuron build)")
    m = re.search(rb'TORCH_VERSION = "([^"]+)"', info)
    if not m:
        sys.exit("pin_torch: _build_info.py names no TORCH_VERSION")
    return m.group(1).decode()


def pin(path):
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        files = {i.filename: z.read(i.filename) for i in infos}
    version = built_torch(files)
    meta_name = next(n for n in files if n.endswith(".dist-info/METADATA"))
    record_name = next(n for n in files if n.endswith(".dist-info/RECORD"))
    lines = [l for l in files[meta_name].decode().split("\n") if not l.startswith("Requires-Dist: torch")]
    # Headers end at the first blank line; the requirement goes with them.
    end = lines.index("") if "" in lines else len(lines)
    lines.insert(end, f"Requires-Dist: torch=={version}")
    files[meta_name] = "\n".join(lines).encode()
    files[record_name] = ("\n".join(record_line(n, d) for n, d in files.items() if n != record_name) +
                          f"\n{record_name},,\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for i in infos:
            z.writestr(i, files[i.filename])
    print(f"pin_torch: {path} requires torch=={version}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        pin(p)
