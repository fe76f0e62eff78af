"""Checks that asv's HTML dashboard of nbjax's benchmarks over commits really renders.

Builds and measures the last ``--commits`` commits of the repository (each in its own
virtualenv, ``asv run``), publishes the dashboard (``asv publish``), serves it on
127.0.0.1 and loads a benchmark's graph page in headless Chromium (Debian's ``chromium``):
the check passes when the page has drawn its plot (flot's canvases inside the graph) with
one point per measured commit, and saves a screenshot next to the dashboard.

asv's pages load jQuery, flot and bootstrap from public CDNs; where those cannot be reached
(this project's CI machines reach only package registries) the script fetches the same
libraries from the npm registry (``npm pack``) and points the page at the local copies.

  cd asv_benchmarks && python dashboard_check.py [--commits 3] [--bench eager.Dispatch]
"""
import argparse
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
HTML = os.path.join(HERE, ".asv", "html")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
                  "--virtual-time-budget=10000"]
# the CDN file asv's index.html names -> (npm package, file inside it)
VENDORED = {
    "jquery-3.3.1.min.js": ("jquery@3.3.1", "dist/jquery.min.js"),
    "jquery.flot.min.js": ("flot@0.8.3", "jquery.flot.js"),
    "jquery.flot.time.min.js": ("flot@0.8.3", "jquery.flot.time.js"),
    "jquery.flot.selection.min.js": ("flot@0.8.3", "jquery.flot.selection.js"),
    "jquery.flot.categories.min.js": ("flot@0.8.3", "jquery.flot.categories.js"),
    "jquery.flot.orderBars.js": ("flot-orderbars@1.0.0", "js/jquery.flot.orderBars.js"),
    "stupidtable.min.js": ("stupid-table-plugin@1.1.3", "stupidtable.min.js"),
    "md5.min.js": ("blueimp-md5@2.19.0", "js/md5.min.js"),
    "bootstrap.min.js": ("bootstrap@3.1.1", "dist/js/bootstrap.min.js"),
    "bootstrap.min.css": ("bootstrap@3.1.1", "dist/css/bootstrap.min.css"),
}


def sh(*cmd, **kw):
  print("+", " ".join(cmd), flush=True)
  return subprocess.run(cmd, check=True, cwd=kw.pop("cwd", HERE), **kw)


def vendor_cdn_scripts():
  """Rewrite the dashboard's CDN links to local copies fetched from the npm registry."""
  cache = os.path.join(HERE, ".asv", "npm")
  os.makedirs(cache, exist_ok=True)
  packs = {}
  for pkg, _ in VENDORED.values():
    if pkg not in packs:
      name = pkg.split("@")[0] + "-" + pkg.split("@")[1] + ".tgz"
      path = os.path.join(cache, name)
      if not os.path.exists(path):
        sh("npm", "pack", pkg, "--silent", cwd=cache, stdout=subprocess.DEVNULL)
      packs[pkg] = path
  index = os.path.join(HTML, "index.html")
  text = open(index).read()
  for fname, (pkg, member) in VENDORED.items():
    with tarfile.open(packs[pkg]) as t:
      data = t.extractfile("package/" + member).read()
    open(os.path.join(HTML, "vendor_" + fname), "wb").write(data)
    # (the npm builds are not byte-identical to the CDN's: drop their integrity hashes)
    text = re.sub(r'"https://[^"]*/' + re.escape(fname) + r'"(\s+integrity="[^"]*")?',
                  f'"vendor_{fname}"', text)
  open(index, "w").write(text)
  left = re.findall(r'(?:src|href)="(https://[^"]*\.(?:js|css))"', text)
  if left:
    raise SystemExit(f"dashboard still loads from the network: {left}")


class _Quiet(http.server.SimpleHTTPRequestHandler):
  def log_message(self, *args):
    pass


def serve():
  handler = functools.partial(_Quiet, directory=HTML)
  srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  return srv


def chromium(*args):
  exe = shutil.which("chromium") or shutil.which("chromium-browser")
  if exe is None:
    raise SystemExit("no chromium: apt-get install chromium")
  prof = os.path.join(HERE, ".asv", "chromium-profile")
  return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={prof}", *args],
                        check=True, capture_output=True, text=True, timeout=120).stdout


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--commits", type=int, default=3)
  ap.add_argument("--bench", default="eager.Dispatch.time_op")
  a = ap.parse_args(argv)
  sh("asv", "machine", "--yes", stdout=subprocess.DEVNULL)
  sh("asv", "run", f"HEAD~{a.commits - 1}..HEAD", "--quick", "--skip-existing-commits",
     "--bench", a.bench)
  sh("asv", "publish")
  vendor_cdn_scripts()
  srv = serve()
  url = f"http://127.0.0.1:{srv.server_address[1]}/#{a.bench}"
  dom = chromium("--dump-dom", url)
  shot = os.path.join(HERE, ".asv", "dashboard.png")
  chromium(f"--screenshot={shot}", url)
  srv.shutdown()
  canvases = len(re.findall(r'<canvas class="flot-(?:base|overlay)"', dom))
  graph = json.load(open(os.path.join(HTML, "index.json")))
  commits = len(graph.get("revision_to_hash", {}))
  print(f"{url}: {canvases} flot canvases; {commits} commits in the dashboard; "
        f"screenshot {shot}")
  if canvases < 2 or "Can not determine continental origin" in dom:
    sys.exit("the dashboard's graph did not render")
  if commits < a.commits:
    sys.exit(f"expected >= {a.commits} measured commits, found {commits}")


if __name__ == "__main__":
  main()
