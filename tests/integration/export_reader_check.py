"""A reader of a directory of published exports (tests/integration/export_publish_test.sh): polls
`current` until told to stop, and checks every version it resolves is whole: READY, a manifest
that parses, a dense.safetensors and table chunks of the sizes their headers give, a model.pt
torch loads. Exits 1 on the first partial version it sees.

  export_reader_check.py VERSIONS_DIR STOP_FILE
"""
import json
import os
import sys
import time

import numpy as np
import torch

from syncopate.safetensors import read_safetensors


def check(version: str) -> None:
    for name in ("READY", "manifest.json", "dense.safetensors", "job.textproto"):
        if not os.path.isfile(os.path.join(version, name)):
            raise AssertionError(f"{version} has no {name}")
    manifest = json.load(open(os.path.join(version, "manifest.json")))
    read_safetensors(os.path.join(version, "dense.safetensors"))
    for table in manifest["tables"]:
        for chunk in table["chunks"]:
            keys = np.load(os.path.join(version, chunk["keys"]), mmap_mode="r")
            assert len(keys) == int(chunk["count"]), f"{chunk['keys']} is short"
    if os.path.exists(os.path.join(version, "model.pt")):
        torch.load(os.path.join(version, "model.pt"))


def main(directory: str, stop: str) -> int:
    seen, reads = set(), 0
    while not os.path.exists(stop):
        try:
            version = os.path.realpath(os.path.join(directory, "current"))
        except OSError:
            version = None
        if version and os.path.isdir(version):
            try:
                check(version)
            except Exception as error:  # noqa: BLE001 - any failure to read is the finding
                # ...unless a later publish removed the version after we resolved it (keep).
                if not os.path.isdir(version):
                    continue
                print(f"partial version {version}: {error}", file=sys.stderr)
                return 1
            seen.add(os.path.basename(version))
            reads += 1
        time.sleep(0.02)
    print(f"reader: {reads} reads of {len(seen)} versions, every one whole")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
