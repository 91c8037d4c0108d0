"""Records the launcher's result for forker.c with both models on 2 vCPUs: python capture.py OUTDIR."""
import glob
import json
import pathlib
import subprocess
import sys
import tempfile

out = pathlib.Path(sys.argv[1])
with tempfile.TemporaryDirectory() as tmp:
    binary = pathlib.Path(tmp) / "forker"
    subprocess.run(["gcc", "-O2", "-static", "-pthread", "-o", str(binary), str(out / "forker.c")], check=True)
    req = {"kernel": sorted(glob.glob("/boot/vmlinuz-*"))[-1], "argv": [str(binary), "200"], "vcpus": 2,
           "accel": "tcg", "plugin": {"branch": True, "coherence": True}, "symbols": "guest", "top": 10,
           "timeout_s": 600, "cache_dir": str(pathlib.Path(tmp) / "cache"), "result": str(out / "result.json")}
    (pathlib.Path(tmp) / "req.json").write_text(json.dumps(req))
    subprocess.run([sys.executable, "-m", "perfab.kernel.launch", str(pathlib.Path(tmp) / "req.json")], check=True)
