"""What the OCI tests share: Debian's docker-registry (distribution 2.8) on
loopback over plain HTTP, the kwctl sources file that lists it as insecure,
and kwctl with a policy store of its own (nothing from an earlier pull can
answer for the registry).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "load"))
import harness  # noqa: E402


class Registry:
    def __init__(self, work, processes, address="127.0.0.1"):
        """`address`: where it listens (loopback unless Pods must reach it)."""
        self.work = work
        self.processes = processes
        self.port = harness.free_port()
        self.host = f"{address}:{self.port}"
        self.url = f"http://{self.host}"
        self.log = os.path.join(work, "registry.log")
        self.sources = os.path.join(work, "sources.yml")
        self.env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
        self.env.update({f"XDG_{d}_HOME": os.path.join(work, "xdg", d.lower()) for d in ("CACHE", "DATA", "CONFIG")})
        self.env.update({"NO_PROXY": f"127.0.0.1,localhost,{address}", "RUST_BACKTRACE": "0"})

    def start(self):
        """True once the registry answers; its log is at `self.log` otherwise."""
        config = os.path.join(self.work, "registry.yml")
        with open(config, "w") as f:
            f.write(f"""version: 0.1
log: {{level: error, accesslog: {{disabled: true}}}}
storage: {{filesystem: {{rootdirectory: {self.work}/registry}}}}
http: {{addr: "{self.host}"}}
""")
        with open(self.sources, "w") as f:
            f.write(f'insecure_sources: ["{self.host}"]\n')
        log = open(self.log, "w")
        self.processes.append(subprocess.Popen(["docker-registry", "serve", config], stdout=log, stderr=log))
        return harness.wait_for(f"{self.url}/v2/", 20, self.processes[-1])

    def uri(self, repository, tag):
        return f"registry://{self.host}/{repository}:{tag}"

    def kwctl(self, *args, timeout=120):
        """kwctl's stdout; raises with its stderr when it fails."""
        out = self.kwctl_run(*args, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"kwctl {' '.join(args)} exited {out.returncode}: {out.stderr[-2000:]}")
        return out.stdout

    def kwctl_run(self, *args, timeout=120):
        return subprocess.run(["kwctl", *args], capture_output=True, text=True, env=self.env, timeout=timeout)
