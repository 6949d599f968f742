"""An OCI image archive made here, for `ctr images import` (no registry is
reachable): one uncompressed layer holding a static busybox and its applets
as links, or given files (a program and the shared libraries it loads), and
a config naming the command and the user. The archive is the same bytes on
every run (times are zero), so containerd sees the same image.
"""
import hashlib
import io
import json
import subprocess
import tarfile

BUSYBOX = "/bin/busybox"  # Debian's busybox-static
APPLETS = ("sh", "sleep", "cat")  # what the Pods and the sandbox run


def _add(tar, name, data=None, link=None, mode=0o755, directory=False):
    info = tarfile.TarInfo(name)
    info.mode, info.mtime, info.uid, info.gid = mode, 0, 0, 0
    if directory:
        info.type = tarfile.DIRTYPE
    elif link:
        info.type, info.linkname = tarfile.SYMTYPE, link
    else:
        info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def _tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            _add(tar, **entry)
    return buf.getvalue()


def _blob(data, media_type):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return {"mediaType": media_type, "digest": digest, "size": len(data)}, data


def shared_libraries(program):
    """The files the dynamic loader maps for `program` (ldd), loader included."""
    out = subprocess.run(["ldd", program], check=True, stdout=subprocess.PIPE, text=True).stdout
    found = []
    for line in out.splitlines():
        words = line.replace("=>", " ").split()
        found += [w for w in words if w.startswith("/")]
    return found


def write(path, name, command, files=None, user=None):
    """Writes an OCI image layout archive to `path`: the image `name`
    (containerd's `io.containerd.image.name`) running `command` as `user`
    ("uid:gid"; none: root). `files`: {path in the image: path here} instead
    of busybox; the parents are made as folders."""
    entries = [{"name": d, "directory": True} for d in ("bin", "dev", "etc", "proc", "sys", "tmp")]
    if files is None:
        with open(BUSYBOX, "rb") as f:
            entries.append({"name": "bin/busybox", "data": f.read()})
        entries += [{"name": f"bin/{applet}", "link": "busybox"} for applet in APPLETS]
    else:
        folders = {"bin", "dev", "etc", "proc", "sys", "tmp"}
        for target, source in sorted(files.items()):
            parts = target.strip("/").split("/")
            for depth in range(1, len(parts)):
                folder = "/".join(parts[:depth])
                if folder not in folders:
                    folders.add(folder)
                    entries.append({"name": folder, "directory": True})
            with open(source, "rb") as f:
                entries.append({"name": "/".join(parts), "data": f.read()})
    if user:
        uid, gid = user.split(":")
        passwd = f"root:x:0:0::/:/bin/false\nuser:x:{uid}:{gid}::/tmp:/bin/false\n"
        entries.append({"name": "etc/passwd", "data": passwd.encode(), "mode": 0o644})
        entries.append({"name": "etc/group", "data": f"root:x:0:\nuser:x:{gid}:\n".encode(), "mode": 0o644})
    layer, layer_data = _blob(_tar(entries), "application/vnd.oci.image.layer.v1.tar")
    image_config = {"Cmd": command, "Env": ["PATH=/bin"]}
    if user:
        image_config["User"] = user
    config, config_data = _blob(json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]},
    }, sort_keys=True).encode(), "application/vnd.oci.image.config.v1+json")
    manifest, manifest_data = _blob(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config, "layers": [layer],
    }, sort_keys=True).encode(), "application/vnd.oci.image.manifest.v1+json")
    manifest["annotations"] = {"io.containerd.image.name": name,
                               "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [manifest]}
    entries = [{"name": "oci-layout", "data": b'{"imageLayoutVersion":"1.0.0"}', "mode": 0o644},
               {"name": "index.json", "data": json.dumps(index, sort_keys=True).encode(), "mode": 0o644},
               {"name": "blobs", "directory": True}, {"name": "blobs/sha256", "directory": True}]
    for desc, data in ((layer, layer_data), (config, config_data), (manifest, manifest_data)):
        entries.append({"name": f"blobs/sha256/{desc['digest'][7:]}", "data": data, "mode": 0o644})
    with open(path, "wb") as f:
        f.write(_tar(entries))
    return path
