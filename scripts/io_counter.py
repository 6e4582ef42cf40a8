"""Counts one server's file syscalls during one run, for scripts/peers.

Each server's processes go into a cgroup (v2) of their own; `perf stat -a -G CGROUP`
then counts the syscall tracepoints of that cgroup alone, so the clients, the other
(paused) servers and anything else on the machine are left out, and a backend forked
during the run is counted because it inherits its parent's cgroup. The counts are the
kernel's, whatever the server's own statistics say: PostgreSQL with the double-write
buffer patch has no counter for its buffer file's fsyncs (issue 37's "cliff").

Root only, and only where perf, the syscall tracepoints (tracefs) and cgroup v2 are
there; `IoCounter.probe()` says why not otherwise. Standard library only.
"""
import os
import shutil
import signal
import subprocess
import tempfile

# What each counted figure sums: the syscalls that make a file durable, and those that
# write a file at an offset (both PostgreSQL and untorn write data and WAL with pwrite;
# plain write() is left out because a server's socket replies use it too).
FIGURES = {
    "fsyncs": ("fsync", "fdatasync"),
    "sync_file_ranges": ("sync_file_range",),
    "pwrites": ("pwrite64", "pwritev", "pwritev2"),
}
TRACEFS = "/sys/kernel/tracing"


def cgroup2_root():
    """Where cgroup v2 is mounted (the unified hierarchy), or None."""
    try:
        with open("/proc/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return fields[1]
    except OSError:
        pass
    return None


def events_available():
    """The syscall tracepoints this kernel has, mounting tracefs when it is not."""
    path = os.path.join(TRACEFS, "available_events")
    if not os.path.exists(path) and os.path.isdir(TRACEFS):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with open(path) as f:
            return {line.strip().split(":", 1)[1] for line in f
                    if line.startswith("syscalls:")}
    except OSError:
        return set()


class IoCounter:
    """One cgroup per server under a parent made for this run of scripts/peers."""

    def __init__(self, root, events):
        self.root = root
        self.parent = tempfile.mkdtemp(prefix="untorn-peers.", dir=root)
        self.events = events  # figure -> [tracepoint], only those the kernel has
        self.groups = {}

    @classmethod
    def probe(cls):
        """(IoCounter, None) where counting works here, else (None, why not)."""
        if os.geteuid() != 0:
            return None, "not root (perf's cgroup counting needs root)"
        if not shutil.which("perf"):
            return None, "no perf (apt-get install linux-perf)"
        root = cgroup2_root()
        if root is None:
            return None, "no cgroup v2 mount"
        have = events_available()
        events = {fig: [f"syscalls:sys_enter_{s}" for s in calls
                        if f"sys_enter_{s}" in have]
                  for fig, calls in FIGURES.items()}
        if not any(events.values()):
            return None, f"no syscall tracepoints under {TRACEFS}"
        # perf may be there and still refused (a container, perf_event_paranoid).
        first = next(t for ts in events.values() for t in ts)
        trial = subprocess.run(["perf", "stat", "-a", "-x", ",", "-e", first, "--", "true"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if trial.returncode != 0:
            return None, f"perf stat refused the syscall tracepoints: {trial.stderr.strip()[-200:]}"
        try:
            counter = cls(root, {k: v for k, v in events.items() if v})
        except OSError as e:
            return None, f"cannot make a cgroup under {root}: {e}"
        return counter, None

    def adopt(self, key, pids):
        """Moves pids (a server's processes) into the cgroup named by key."""
        path = self.groups.get(key)
        if path is None:
            path = os.path.join(self.parent, f"s{len(self.groups)}")
            os.mkdir(path)
            self.groups[key] = path
        for pid in pids:
            try:
                with open(os.path.join(path, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
            except (ProcessLookupError, OSError):
                pass  # exited meanwhile

    def start(self, key):
        """Starts counting key's cgroup; returns what stop() takes."""
        group = os.path.relpath(self.groups[key], self.root)
        tracepoints = [t for ts in self.events.values() for t in ts]
        out = tempfile.NamedTemporaryFile(prefix="perf-stat.", suffix=".csv", delete=False)
        out.close()
        cmd = ["perf", "stat", "-a", "-x", ",", "-o", out.name, "-e", ",".join(tracepoints),
               "-G", ",".join([group] * len(tracepoints))]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        return proc, out.name

    def stop(self, started):
        """The figures counted since start(): {figure: count}; {} when perf failed."""
        proc, path = started
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            err = "perf stat did not stop"
        counts = {}
        try:
            with open(path) as f:
                for line in f:
                    fields = line.strip().split(",")
                    if len(fields) > 2 and fields[2].startswith("syscalls:") and \
                            fields[0].isdigit():
                        counts[fields[2]] = int(fields[0])
        finally:
            os.remove(path)
        if not counts:
            raise RuntimeError(f"perf stat counted nothing: {err.strip()[-500:]}")
        return {fig: sum(counts.get(t, 0) for t in ts) for fig, ts in self.events.items()}

    def close(self):
        """Removes the cgroups; a process still in one goes back to the root first."""
        for path in list(self.groups.values()) + [self.parent]:
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    left = f.read().split()
                for pid in left:
                    with open(os.path.join(self.root, "cgroup.procs"), "w") as f:
                        f.write(pid)
            except OSError:
                pass
            try:
                os.rmdir(path)
            except OSError:
                pass
        self.groups.clear()
