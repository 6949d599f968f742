"""Test hosts of the cluster tests' own: network namespaces on a bridge of
this machine (`ip netns`, a veth pair each), so that a process can have an
address that is not loopback (EndpointSlices refuse 127.0.0.0/8) while its
traffic stays on this machine. A test host gets only its subnet's route: it
reaches this machine's bridge address and the other test hosts, nothing else.
Needs root and iproute2.
"""
import subprocess

# One subnet for every test host: the bridge (this machine) is .1, host i is .(10 + i).
SUBNET = "10.213.0"
BRIDGE = "nmptest-br"
PREFIX = "nmptest-"


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class TestNetwork:
    """The bridge and the test hosts made on it; `close()` removes them all."""

    def __init__(self):
        self.hosts = []
        self.gateway = f"{SUBNET}.1"

    def open(self):
        self.remove_leftovers()
        ip("link", "add", BRIDGE, "type", "bridge")
        ip("addr", "add", f"{self.gateway}/24", "dev", BRIDGE)
        ip("link", "set", BRIDGE, "up")
        return self

    def host(self, index):
        """A new network namespace with the address SUBNET.(10 + index)."""
        name = f"{PREFIX}{index}"
        veth = f"nmpv{index}"
        ip("netns", "add", name)
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name)
        ip("link", "set", veth, "master", BRIDGE)
        ip("link", "set", veth, "up")
        address = f"{SUBNET}.{10 + index}"
        ip("-n", name, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", name, "link", "set", "eth0", "up")
        ip("-n", name, "link", "set", "lo", "up")
        host = TestHost(name, address, veth)
        self.hosts.append(host)
        return host

    def close(self):
        for host in self.hosts:
            ip("link", "del", host.veth, check=False)
            ip("netns", "del", host.namespace, check=False)
        self.hosts.clear()
        ip("link", "del", BRIDGE, check=False)

    @staticmethod
    def remove_leftovers():
        """What a run that was killed left behind."""
        for line in ip("netns", "list", check=False).stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            if name.startswith(PREFIX):
                ip("netns", "del", name, check=False)
        for line in ip("-br", "link", check=False).stdout.splitlines():
            name = line.split("@")[0].split()[0] if line.split() else ""
            if name.startswith("nmpv"):
                ip("link", "del", name, check=False)
        ip("link", "del", BRIDGE, check=False)


class TestHost:
    def __init__(self, namespace, address, veth):
        self.namespace = namespace
        self.address = address
        self.veth = veth

    def command(self, args):
        """`args` run inside this host's network namespace."""
        return ["ip", "netns", "exec", self.namespace, *args]
