"""RSS of one apiserver-fake server process on etcd holding N ConfigMaps of 1 kB in its watch cache.

Usage: python3 scripts/watch-cache-memory.py BINARY N [true|false]  (the --watch-cache value; default true)
Starts `BINARY cluster --config` (one server, etcd, processes), creates N ConfigMaps of 1 kB through it
(16 threads), lists them once (a full list) and opens a watch list read to its initial-events-end
bookmark, then prints the server's VmRSS (and VmHWM).
"""
import json, os, shutil, subprocess, sys, tempfile, time, threading
import urllib3

binary, count = sys.argv[1], int(sys.argv[2])
cache = sys.argv[3] if len(sys.argv) > 3 else "true"
d = tempfile.mkdtemp(prefix="watch-cache-memory-")
cfg = os.path.join(d, "cfg.yaml")
open(cfg, "w").write(
    f'servers:\n- {{name: s0, version: "1.36", flags: {{watch-cache: "{cache}"}}}}\n'
    "store: etcd\nrun: processes\nlb: none\ncontrollers: false\n")
cluster = subprocess.Popen([binary, "cluster", "--port", "0", "--dir", os.path.join(d, "c"), "--config", cfg],
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "err.log"), "w"))
manifest_path = os.path.join(d, "c", "cluster.json")
try:
    deadline = time.time() + 60
    while not os.path.exists(manifest_path):
        if cluster.poll() is not None or time.time() > deadline:
            sys.exit("cluster did not start: " + open(os.path.join(d, "err.log")).read())
        time.sleep(0.05)
    time.sleep(0.2)
    manifest = json.load(open(manifest_path))
    server = manifest["servers"][0]
    c = os.path.join(d, "c")
    pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=os.path.join(c, "ca.crt"),
                               cert_file=os.path.join(c, "admin.crt"), key_file=os.path.join(c, "admin.key"),
                               maxsize=16, assert_hostname=False)
    url = server["url"]
    base = url + "/api/v1/namespaces/default/configmaps"
    value = "x" * 1000

    def create(start):
        for i in range(start, count, 16):
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"scale-{i}"},
                               "data": {"k": value}})
            r = pool.request("POST", base, body=body, headers={"Content-Type": "application/json"})
            assert r.status == 201, (r.status, r.data[:200])

    def rss(pid):
        fields = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status") if ":" in l)
        return {k: round(int(fields[k].split()[0]) / 1024, 1) for k in ("VmRSS", "VmHWM")}

    pid = server["pid"]
    print("idle", rss(pid))
    # The cache starts on the first list: start it before the writes, as a running server has it.
    assert pool.request("GET", base).status == 200
    t0 = time.time()
    threads = [threading.Thread(target=create, args=(s,)) for s in range(16)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print(f"created {count} in {time.time() - t0:.1f}s", rss(pid))
    r = pool.request("GET", base)
    assert r.status == 200 and len(json.loads(r.data)["items"]) == count
    del r
    print("after a list", rss(pid))
    r = pool.request("GET", base + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
                     preload_content=False)
    added = 0
    buf = b""
    for chunk in r.stream(65536):
        buf += chunk
        done = False
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            e = json.loads(line)
            if e["type"] == "ADDED":
                added += 1
            if e["type"] == "BOOKMARK" and e["object"]["metadata"].get("annotations", {}).get("k8s.io/initial-events-end") == "true":
                done = True
                break
        if done:
            break
    r.release_conn()
    print("after a list and a watch list", rss(pid), "watch list added", added)
    time.sleep(3)
    print("3 s later", rss(pid))
    time.sleep(12)
    print("15 s later", rss(pid))
finally:
    cluster.terminate()
    cluster.wait(timeout=30)
    shutil.rmtree(d, ignore_errors=True)
