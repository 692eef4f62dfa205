# SPDX-License-Identifier: MIT
"""soak.py -- the soak test's harness (run through scripts/soak.sh).

Several soak_worker processes (tests/reliability/soak_worker.c), each with
several threads, share one store and one redis-server for --minutes, while
this harness injects real faults:

  kill9_*       kill -9 of a worker caught writing a store entry (it
                has a file of v1/tmp open: kill9_write), else compiling (it
                holds a key's v1/locks/KEY.lock: kill9_compile), else of any one
  redis_stop    the server stopped (SIGSTOP) for 1-3 s, then continued
  redis_restart the server killed and started again on the same port
  redis_flush   FLUSHALL
  disk_full     the store is a tmpfs of a few MB (as root): it fills up;
                `kcache gc --max-size` empties half of it now and then
  corrupt       16 random bytes written into a random entry file
  cc_kill       the compiler (cc or tcc, through a KC_HOST_CC wrapper)
                kills itself with SIGKILL while it compiles, at random
  plant_*       a hostile neighbour: an entry replaced by a FIFO, a
                directory (not empty) or a link to /dev/zero; a FIFO at a
                bucket's index or at a key's lock file; in Redis, an entry
                deleted and its lock planted with no expiry, or with a
                well-formed value and an expiry within the lock timeout

and samples every worker's RSS and open descriptors each second. Worker 0
is never killed: its samples show whether memory stays bounded over the
whole run. At the end it prints launches checked, wrong results (must be
0), processes killed, faults by kind, entries damaged and healed, memory
and descriptors over time, and the temp and lock files left (0 after the
store's sweep). Exit status 0 when every criterion holds.
"""
import argparse
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


ASAN_QUARANTINE_MB = 16  # what an ASan build's freed memory may hold back (ASAN_OPTIONS of the workers)


def log(msg):
    print(msg, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Redis:
    def __init__(self, root):
        self.dir = os.path.join(root, "redis")
        os.makedirs(self.dir)
        self.port = free_port()
        self.proc = None
        self.stopped = False
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
             "no", "--dir", self.dir, "--maxmemory", "256mb", "--maxmemory-policy", "allkeys-lru"],
            stdout=open(os.path.join(self.dir, "redis.log"), "a"), stderr=subprocess.STDOUT)
        for _ in range(200):
            if self.cli("PING") == "PONG":
                return
            time.sleep(0.05)
        raise SystemExit("soak: redis-server does not answer")

    def cli(self, *args):
        try:
            r = subprocess.run(["redis-cli", "-p", str(self.port)] + list(args), capture_output=True,
                               text=True, timeout=5)
            return r.stdout.strip()
        except subprocess.TimeoutExpired:
            return ""

    def cont(self):
        if self.stopped:
            self.proc.send_signal(signal.SIGCONT)
            self.stopped = False

    def stop(self):
        self.proc.send_signal(signal.SIGSTOP)
        self.stopped = True

    def restart(self):
        self.cont()
        self.proc.kill()
        self.proc.wait()
        self.start()

    def close(self):
        self.cont()
        self.proc.kill()
        self.proc.wait()


WRAPPER = """#!/bin/sh
# a compiler that kills itself (SIGKILL) mid-compile now and then
real=$1; shift
n=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')
if [ "$n" -lt {threshold} ]; then
  ( sleep 0.00$((n % 9 + 1)); kill -9 $$ 2>/dev/null && echo k >> "{kills}" ) &
fi
exec "$real" "$@"
"""


def block_sigterm():
    """In a worker before its exec: the SIGTERM that ends the run, if it
    comes before the worker has installed its handler, waits for it (the
    worker unblocks it then) instead of killing it without its statistics."""
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])


def proc_sample(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        fds = len(os.listdir("/proc/%d/fd" % pid))
        return rss, fds
    except (OSError, StopIteration):
        return None


def what_open(pid):
    """kill9_write: pid has an entry's temp file open; kill9_compile: a
    key's lock file (held from the miss through the compile to the write)."""
    what = None
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if "/v1/tmp/" in t or "/.tmp-" in t:  # the store's temp files (.tmp-: an earlier layout)
                return "kill9_write"
            if "/v1/locks/" in t and t.endswith(".lock"):
                what = "kill9_compile"
    except OSError:
        pass
    return what


def count_files(store):
    """The store's temp and lock files: v1/tmp/* and v1/locks/*, and those an
    earlier kcache put in the bucket directories (v1/??/.tmp-*, v1/??/*.lock)."""
    v1 = os.path.join(store, "v1")
    temps = glob.glob(os.path.join(v1, "tmp", "*")) + glob.glob(os.path.join(v1, "??", ".tmp-*"))
    locks = glob.glob(os.path.join(v1, "locks", "*")) + glob.glob(os.path.join(v1, "??", "*.lock"))
    return temps, locks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=3)
    ap.add_argument("--build", default="build")
    ap.add_argument("--store-mb", type=int, default=4)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    worker = os.path.join(a.build, "tests", "reliability", "soak_worker")
    cli = os.path.join(a.build, "cli", "kcache")
    for exe in (worker, cli):
        if not os.access(exe, os.X_OK):
            raise SystemExit("soak: %s is not built (cmake --build %s)" % (exe, a.build))
    ccs = [c for c in ("cc", "tcc") if shutil.which(c)]
    root = tempfile.mkdtemp(prefix="kc-soak-")
    store, tmp = os.path.join(root, "store"), os.path.join(root, "tmp")
    os.makedirs(store, mode=0o700)
    os.makedirs(tmp, mode=0o700)
    mounted = False
    if os.geteuid() == 0:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm,mode=0700" % a.store_mb, "tmpfs", store])
        mounted = r.returncode == 0
    seconds = a.minutes * 60
    log("soak: %.1f min, %d processes x %d threads, compilers %s, seed %d, store %s (%s)" %
        (a.minutes, a.procs, a.threads, "+".join(ccs), a.seed, store,
         "tmpfs of %d MB" % a.store_mb if mounted else
         "a plain directory: NOT ROOT or mount failed, so the disk-full fault is not injected"))
    redis = Redis(root)
    kills_file = os.path.join(root, "cc-kills")
    wrapper = os.path.join(root, "killcc.sh")
    with open(wrapper, "w") as f:
        f.write(WRAPPER.format(threshold=13, kills=kills_file))  # 13/256: 5% of compiles armed
    os.chmod(wrapper, 0o755)
    faults = {k: 0 for k in ("kill9_write", "kill9_compile", "kill9_random", "redis_stop", "redis_restart", "redis_flush",
                             "disk_full", "corrupt", "cc_kill") + PLANTS}
    env0 = dict(os.environ, KC_CACHE_DIR=store, KC_REMOTE="redis://127.0.0.1:%d" % redis.port, TMPDIR=tmp,
                KC_REMOTE_PREFIX="soak:")
    env0.pop("KC_CACHE_DISABLE", None)
    # an ASan build: a small quarantine, so that RSS measures kcache, not the freed memory ASan holds back
    env0["ASAN_OPTIONS"] = ":".join(x for x in (os.environ.get("ASAN_OPTIONS"),
                                                "quarantine_size_mb=%d" % ASAN_QUARANTINE_MB) if x)
    slots = []  # per slot: {"proc", "n", "stats"}
    procs = {}  # pid -> record of samples
    seq = [0]

    def spawn(i):
        seq[0] += 1
        stats = os.path.join(root, "stats-%d-%d.json" % (i, seq[0]))
        env = dict(env0, KC_HOST_CC="%s %s" % (wrapper, ccs[i % len(ccs)]))
        errlog = os.path.join(root, "worker-%d-%d.log" % (i, seq[0]))
        p = subprocess.Popen([worker, "--id", str(i), "--threads", str(a.threads), "--seconds",
                              str(seconds + 3600), "--stats", stats, "--seed", str(rng.randrange(1 << 30))],
                             env=env, stdout=subprocess.DEVNULL, stderr=open(errlog, "w"),
                             preexec_fn=block_sigterm)
        procs[p.pid] = {"slot": i, "cc": ccs[i % len(ccs)], "t0": time.time(), "samples": [], "stats": stats,
                        "killed": False, "proc": p, "log": errlog}
        return p

    for i in range(a.procs):
        slots.append(spawn(i))
    t_start = time.time()
    next_fault = t_start + 2
    full_before = False
    last_print = t_start
    while time.time() - t_start < seconds:
        time.sleep(0.25)
        now = time.time()
        for pid, rec in procs.items():
            if rec["proc"].poll() is None:
                s = proc_sample(pid)
                if s and (not rec["samples"] or now - rec["samples"][-1][0] >= 1):
                    rec["samples"].append((now - t_start, s[0], s[1]))
        for i, p in enumerate(slots):  # a worker that exited by itself is a failure: noted, replaced
            if p.poll() is not None and not procs[p.pid]["killed"]:
                procs[p.pid]["exited"] = p.returncode
                slots[i] = spawn(i)
        if mounted:
            st = os.statvfs(store)
            full = st.f_bavail * st.f_frsize < 256 * 1024
            if full and not full_before:
                faults["disk_full"] += 1
            full_before = full
            if full and rng.random() < 0.05:  # room again, now and then
                subprocess.run([cli, "--dir", store, "gc", "--max-size", "%dK" % (a.store_mb * 512)],
                               capture_output=True)
        if now >= next_fault:
            next_fault = now + rng.uniform(1.0, 4.0)
            redis.cont()
            kind = rng.choice(["kill9", "kill9", "redis_stop", "redis_restart", "redis_flush", "corrupt",
                               "corrupt", "plant", "plant"])
            if kind == "kill9":
                cands, until, how = [], time.time() + 2, "kill9_write"
                while not cands and time.time() < until:  # catch one writing an entry, or compiling
                    busy = {p: what_open(p.pid) for p in slots[1:]}
                    for want in ("kill9_write", "kill9_compile"):
                        cands = [p for p, w in busy.items() if w == want]
                        if cands:
                            how = want
                            break
                    if not cands:
                        time.sleep(0.002)
                if not cands:
                    cands, how = slots[1:], "kill9_random"
                if cands:
                    p = rng.choice(cands)
                    procs[p.pid]["killed"] = True
                    p.kill()
                    p.wait()
                    faults[how] += 1
                    slots[slots.index(p)] = spawn(slots.index(p))
            elif kind == "redis_stop":
                redis.stop()
                faults["redis_stop"] += 1
                next_fault = now + rng.uniform(1.0, 3.0)  # continued at the next fault
            elif kind == "redis_restart":
                redis.restart()
                faults["redis_restart"] += 1
            elif kind == "redis_flush":
                redis.cli("FLUSHALL")
                faults["redis_flush"] += 1
            elif kind == "plant":
                how = plant(rng, store, redis)
                if how:
                    faults[how] += 1
            elif kind == "corrupt":
                entries = glob.glob(os.path.join(store, "v1", "??", "*.kce"))
                if entries:
                    e = rng.choice(entries)
                    try:
                        size = os.path.getsize(e)
                        with open(e, "r+b") as f:
                            f.seek(rng.randrange(max(size - 16, 1)))
                            f.write(os.urandom(16))
                        faults["corrupt"] += 1
                    except OSError:
                        pass
        if now - last_print >= 60:
            last_print = now
            log("  %4.0f s: %d processes started, faults %s" % (now - t_start, len(procs),
                                                               sum(faults.values())))
    # the end: every worker stops by itself (SIGTERM), the server continued
    redis.cont()
    for p in slots:
        p.send_signal(signal.SIGTERM)
    hung = 0
    for p in slots:
        try:
            p.wait(timeout=120)
            if p.returncode:  # 1: a wrong result; a sanitizer's report (a leak at exit)
                procs[p.pid]["exited"] = p.returncode
        except subprocess.TimeoutExpired:
            hung += 1
            p.kill()
            p.wait()
    elapsed = time.time() - t_start
    try:
        with open(kills_file) as f:
            faults["cc_kill"] = sum(1 for _ in f)
    except OSError:
        pass
    # the host work directories of workers killed during a compile: the host backend of each new runtime
    # removes those of processes that have ended; one more runtime here, after every worker is gone
    dirs_before = len(glob.glob(os.path.join(tmp, "kcache-host-*")))
    sw = subprocess.run([worker, "--sweep"], env=dict(env0, KC_HOST_CC=ccs[0]), capture_output=True, text=True)
    if sw.returncode:
        log("soak: the final sweep's runtime failed: %s" % sw.stderr.strip())
    report(a, root, store, tmp, cli, procs, slots, faults, elapsed, hung, mounted, redis, dirs_before)


PLANTS = ("plant_entry_fifo", "plant_entry_dir", "plant_entry_link", "plant_index_fifo", "plant_lock_fifo",
          "plant_redis_lock_forever", "plant_redis_lock_real")
# the slowest launch a worker may see under all of the above (a compile under load, a wait for a lock that a
# neighbour planted, bounded by 4 times how long compiles took here), below the 29 s such a lock lasts and
# the Redis lock timeout of 30 s
LAUNCH_MS_BOUND = 20000


def plant(rng, store, redis):
    """What a neighbour sharing the store or the server plants; returns the fault's name (None: nothing to
    plant on yet)."""
    how = rng.choice(PLANTS)
    v1 = os.path.join(store, "v1")
    try:
        if how.startswith("plant_entry"):
            entries = glob.glob(os.path.join(v1, "??", "*.kce"))
            if not entries:
                return None
            e = rng.choice(entries)
            os.unlink(e)
            if how == "plant_entry_fifo":
                os.mkfifo(e)
            elif how == "plant_entry_dir":
                os.mkdir(e)
                open(os.path.join(e, "theirs"), "w").close()
            else:
                os.symlink("/dev/zero", e)
        elif how == "plant_index_fifo":
            idx = [p for p in glob.glob(os.path.join(v1, "index", "??")) if os.path.isfile(p)]
            if not idx:
                return None
            p = rng.choice(idx)
            os.unlink(p)
            os.mkfifo(p)
        elif how == "plant_lock_fifo":
            entries = glob.glob(os.path.join(v1, "??", "*.kce"))
            if not entries:
                return None
            lk = os.path.join(v1, "locks", os.path.basename(rng.choice(entries))[:32] + ".lock")
            if os.path.lexists(lk):
                return None
            os.mkfifo(lk)
        else:
            names = [n for n in redis.cli("--scan", "--pattern", "soak:*").split() if not n.endswith(":lock")]
            if not names:
                return None
            n = rng.choice(names)
            redis.cli("DEL", n)  # the next cold start of it meets the lock
            if how == "plant_redis_lock_forever":
                redis.cli("SET", n + ":lock", "x")
            else:
                redis.cli("SET", n + ":lock", "neighbour:1:00000000000000ab", "PX", "29000")
    except OSError:
        return None
    return how


def report(a, root, store, tmp, cli, procs, slots, faults, elapsed, hung, mounted, redis, dirs_before):
    tot = {}
    fails = {}
    lost_stats = 0
    for rec in procs.values():
        try:
            with open(rec["stats"]) as f:
                s = json.load(f)
        except (OSError, ValueError):
            lost_stats += not rec["killed"]  # one killed within its first second has written none
            continue
        rec["s"] = s
        for k, v in s.items():
            if k == "launch_ms_max":
                tot[k] = max(tot.get(k, 0), v)
            elif (isinstance(v, int) and not isinstance(v, bool) and k not in ("id", "pid")
                    and not k.startswith(("heap_", "rss_"))):
                tot[k] = tot.get(k, 0) + v
        for k, v in s["fails"].items():
            fails[k] = fails.get(k, 0) + v
    wrong_lines = 0
    for lf in glob.glob(os.path.join(root, "worker-*.log")):
        with open(lf, errors="replace") as f:
            for line in f:
                if "WRONG" in line:
                    wrong_lines += 1
                    log("  " + line.rstrip())
    exited = [r for r in procs.values() if "exited" in r]
    killed = sum(1 for r in procs.values() if r["killed"])
    log("")
    log("soak: %.0f s, %d processes (%d killed with SIGKILL, %d failed (died, or exited non-zero), "
        "%d did not stop within 120 s of SIGTERM)" % (elapsed, len(procs), killed, len(exited), hung))
    for r in exited:
        log("  worker slot %d: exit status %s; the end of its output:" % (r["slot"], r["exited"]))
        try:
            with open(r["log"], errors="replace") as f:
                for line in f.readlines()[-8:]:
                    log("    " + line.rstrip())
        except OSError:
            pass
    log("launches checked against the model: %d (%d pinned), not checkable (a definition around it): %d"
        % (tot.get("checked", 0), tot.get("pinned", 0), tot.get("unchecked", 0)))
    wrong = tot.get("wrong", 0) + (wrong_lines if not tot.get("wrong") else 0)
    log("wrong results: %d" % wrong)
    log("definitions: %d (identical: %d), context resets: %d, kc_collect: %d, runtime re-creations: %d"
        % (tot.get("defines", 0), tot.get("identical", 0), tot.get("resets", 0), tot.get("collects", 0),
           tot.get("recreates", 0)))
    log("compiles: %d, disk hits: %d, disk misses: %d, remote hits: %d, uploads: %d"
        % (tot.get("compiles", 0), tot.get("disk_hits", 0), tot.get("disk_misses", 0),
           tot.get("remote_hits", 0), tot.get("remote_uploads", 0)))
    log("failed calls by status (faults reported as errors, not wrong results): %s"
        % (json.dumps(fails, sort_keys=True) if fails else "none"))
    log("faults injected: %s (total %d)" % (json.dumps(faults), sum(faults.values())))
    # damage: what the runtimes repaired; what a final verify still finds (entries damaged but never read)
    v = subprocess.run([cli, "--dir", store, "--json", "verify"], capture_output=True, text=True, timeout=300)
    planted_found = 0
    try:
        vj = json.loads(v.stdout)
        found = len(vj.get("damaged") or [])
        planted_found = len(vj.get("planted") or [])
    except ValueError:
        found = 1 if v.returncode else 0
    planted = sum(faults[k] for k in PLANTS if not k.startswith("plant_redis"))
    log("planted by the neighbour: %d in the store (%d still there at the end, found by verify and removed by "
        "--repair), %d Redis locks; the slowest launch of any worker: %d ms (bound %d ms; the lock timeout is "
        "30 s)"
        % (planted, planted_found, faults["plant_redis_lock_forever"] + faults["plant_redis_lock_real"],
           tot.get("launch_ms_max", 0), LAUNCH_MS_BOUND))
    subprocess.run([cli, "--dir", store, "verify", "--repair"], capture_output=True)
    v2 = subprocess.run([cli, "--dir", store, "verify"], capture_output=True, text=True)
    sj = json.loads(subprocess.run([cli, "--dir", store, "--json", "stats"], capture_output=True,
                                   text=True).stdout or "{}")
    repairs = sj.get("counters", {}).get("repairs", 0)
    # each damaged entry is counted once, by the process that removed it; what no process read again is
    # what verify finds (an entry damaged twice, or evicted first, is neither)
    log("entries damaged by the harness: %d; repaired (removed and compiled again) by the store: %d; "
        "verify then: exit %d (%s), after --repair: exit %d"
        % (faults["corrupt"], repairs, v.returncode,
           "%d damaged, never read again" % found if v.returncode else "clean", v2.returncode))
    repairs_ok = repairs + found <= faults["corrupt"]
    if not repairs_ok:
        log("soak: %d repaired and %d found damaged, of %d damaged: the store removes (or counts) entries "
            "nobody damaged" % (repairs, found, faults["corrupt"]))
    # memory and descriptors. Sampled RSS keeps the high-water mark of the heap, and between two collects
    # the heap holds the code of every world made since (see RELIABILITY.md): so what must stay flat is
    # what survives a collect: each worker, right after a kc_collect, gives its free memory back
    # (malloc_trim, or ASan's purge) and records its RSS; and the live heap then. Descriptors: worker 0's
    # by quarter of its life.
    asan = any(r.get("s", {}).get("asan") for r in procs.values())
    slack_mb = 8 + (ASAN_QUARANTINE_MB if asan else 0)
    bounded = True
    log("memory and descriptors per process (RSS in MB: first sample / max / last; descriptors max):")
    rows = sorted(procs.items(), key=lambda kv: (kv[1]["slot"], kv[1]["t0"]))
    long_lived = [kv for kv in rows if kv[1]["slot"] == 0]
    for pid, r in rows:
        s = r["samples"]
        if not s:
            continue
        if r["slot"] == 0 or len(s) >= 60 or pid == rows[-1][0]:
            h = r.get("s", {})
            heap = ("; heap in use (MB) before a kc_collect max %.1f, after it first / max / last %.1f / %.1f / %.1f"
                    % tuple(h.get(k, 0) / 1024 for k in ("heap_before_collect_max", "heap_after_collect_first",
                                                         "heap_after_collect_max", "heap_after_collect_last"))
                    if h.get("heap_after_collect_first") else "")
            log("  pid %d slot %d (%s)%s: %d s, RSS %.1f / %.1f / %.1f, fds max %d%s"
                % (pid, r["slot"], r["cc"], " killed" if r["killed"] else "", s[-1][0] - s[0][0],
                   s[0][1] / 1024, max(x[1] for x in s) / 1024, s[-1][1] / 1024, max(x[2] for x in s), heap))
    for pid, r in long_lived:
        s = r["samples"]
        if len(s) < 4:
            continue
        q = len(s) // 4
        parts = [s[:q], s[q:2 * q], s[2 * q:3 * q], s[3 * q:]]
        rss = [max(x[1] for x in p) / 1024 for p in parts]
        fds = [max(x[2] for x in p) for p in parts]
        log("  worker 0 (never killed), by quarter of its life: RSS max %s MB, fds max %s"
            % (" / ".join("%.1f" % x for x in rss), " / ".join(str(x) for x in fds)))
        if fds[3] > fds[1] + 8:
            bounded = False
    # what survives a collect, in every process that collected: RSS after it (and the trim) at most 1.5 x
    # the first collect's plus 8 MB (plus the quarantine under ASan)
    after = [(pid, r["s"]) for pid, r in procs.items() if r.get("s", {}).get("rss_after_collect_first")]
    rss_ok = all(h["rss_after_collect_max"] <= 1.5 * h["rss_after_collect_first"] + slack_mb * 1024
                 for _, h in after)
    if after:
        log("RSS right after kc_collect (free memory given back), over %d processes: first at most %.1f MB, "
            "max at most %.1f MB; flat (max <= 1.5 x first + %d MB in each): %s"
            % (len(after), max(h["rss_after_collect_first"] for _, h in after) / 1024,
               max(h["rss_after_collect_max"] for _, h in after) / 1024, slack_mb, "yes" if rss_ok else "NO"))
        for pid, h in after:
            if h["rss_after_collect_max"] > 1.5 * h["rss_after_collect_first"] + slack_mb * 1024:
                log("  pid %d: RSS after a collect %.1f MB first, %.1f MB max"
                    % (pid, h["rss_after_collect_first"] / 1024, h["rss_after_collect_max"] / 1024))
    bounded = bounded and rss_ok
    # the live heap after each kc_collect (glibc's mallinfo2, or ASan's count of what is allocated): what a
    # leak would grow
    heaps = [r["s"] for r in procs.values() if r.get("s", {}).get("heap_after_collect_first")]
    heap_ok = all(h["heap_after_collect_max"] <= 2 * h["heap_after_collect_first"] + 4096 for h in heaps)
    if heaps:
        log("heap in use after kc_collect, over %d processes: at most %.1f MB (first collect's at most %.1f MB); "
            "before a kc_collect at most %.1f MB (the code of every world since the last one); flat (max <= 2 x "
            "first + 4 MB in each): %s"
            % (len(heaps), max(h["heap_after_collect_max"] for h in heaps) / 1024,
               max(h["heap_after_collect_first"] for h in heaps) / 1024,
               max(h["heap_before_collect_max"] for h in heaps) / 1024, "yes" if heap_ok else "NO"))
    else:
        log("heap in use after kc_collect: not measured (neither glibc's mallinfo2 nor ASan)")
    bounded = bounded and heap_ok
    peak_fds = max((max(x[2] for x in r["samples"]) for r in procs.values() if r["samples"]), default=0)
    peak_rss = max((max(x[1] for x in r["samples"]) for r in procs.values() if r["samples"]), default=0)
    log("peak over all processes: RSS %.1f MB, %d descriptors; bounded (RSS and the heap right after each "
        "collect flat in every process, worker 0's descriptors + 8 at most): %s"
        % (peak_rss / 1024, peak_fds, "yes" if bounded else "NO"))
    # leftovers
    temps, locks = count_files(store)
    hostdirs = glob.glob(os.path.join(tmp, "kcache-host-*"))
    log("left after the run: %d temp files, %d lock files in the store (writers and compiles killed "
        "with SIGKILL); host work directories in TMPDIR: %d after the workers stopped (%d processes were "
        "killed; the runtimes made since removed the others), %d after one more runtime's sweep"
        % (len(temps), len(locks), dirs_before, killed, len(hostdirs)))
    old = time.time() - 7200  # past the store's stale thresholds (temp 1 h, lock 10 min)
    for pth in temps + locks:
        try:
            os.utime(pth, (old, old))
        except OSError:
            pass
    subprocess.run([cli, "--dir", store, "gc"], capture_output=True)
    temps2, locks2 = count_files(store)
    log("left after the store's sweep (kcache gc, the files aged past its thresholds): %d temp files, "
        "%d lock files" % (len(temps2), len(locks2)))
    why = [w for bad, w in (
        (wrong, "%d wrong results" % wrong),
        (exited, "%d workers died or exited non-zero" % len(exited)),
        (hung, "%d workers did not stop" % hung),
        (not bounded, "memory or descriptors grew (RSS or the heap after kc_collect, or worker 0's descriptors)"),
        (temps2 or locks2, "%d temp and %d lock files left after the sweep" % (len(temps2), len(locks2))),
        (hostdirs, "%d host work directories left" % len(hostdirs)),
        (v2.returncode, "verify --repair left damage (exit %d)" % v2.returncode),
        (not repairs_ok, "%d repairs + %d found > %d damaged" % (repairs, found, faults["corrupt"])),
        (not tot.get("checked", 0), "no launch was checked"),
        (tot.get("launch_ms_max", 0) > LAUNCH_MS_BOUND,
         "a launch took %d ms (bound %d)" % (tot.get("launch_ms_max", 0), LAUNCH_MS_BOUND)),
        (lost_stats, "%d workers left no statistics" % lost_stats)) if bad]
    ok = not why
    # one line that says why (scripts/test.sh repeats it in its summary)
    log("soak: %s" % ("PASS" if ok else "FAIL: " + "; ".join(why) + " (seed %d)" % a.seed))
    redis.close()
    if mounted:
        subprocess.run(["umount", store])
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        log("soak: kept %s" % root)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
