#!/usr/bin/env python3
"""Checks what deploy/docker/Dockerfile and Dockerfile.neuron promise, on the instructions as BuildKit's own parser
reads them (PyPI `dockerfile`, a binding of the Go parser Docker uses), not on text.

  check_dockerfiles.py DOCKERFILE...

Each file: `ARG BASE=debian:12` before the first FROM and every FROM on ${BASE} (or an earlier stage); two or more
stages, the last one the runtime; in the runtime stage no compiler or build tool is installed, a numeric non-root
USER, EXPOSE 8000 and 8001, a HEALTHCHECK in exec form, STOPSIGNAL SIGTERM, ENTRYPOINT in exec (JSON) form naming
sluice-server (so the server is PID 1 and receives the SIGTERM), CMD passing --config. Exit 1 on any failure.
"""
import sys

import dockerfile

BUILD_TOOLS = {"build-essential", "cmake", "ninja-build", "g++", "gcc", "clang", "ccache", "libtorch-dev",
               "python3-torch", "python3-dev"}


def check(path):
    errors = []
    commands = dockerfile.parse_file(path)
    froms = [i for i, c in enumerate(commands) if c.cmd == "FROM"]
    if not froms:
        return [f"{path}: no FROM"]
    args_before = [c.value[0] for c in commands[:froms[0]] if c.cmd == "ARG"]
    if "BASE=debian:12" not in args_before:
        errors.append(f"{path}: no `ARG BASE=debian:12` before the first FROM (found {args_before})")
    stages = []
    for i in froms:
        value = commands[i].value
        image = value[0]
        name = value[2] if len(value) == 3 and value[1].upper() == "AS" else None
        if image != "${BASE}" and image not in stages:
            errors.append(f"{path}:{commands[i].start_line}: FROM {image}: neither ${{BASE}} nor an earlier stage")
        stages.append(name)
    if len(stages) < 2:
        errors.append(f"{path}: single stage: the build tools would ship in the image")
    runtime = commands[froms[-1]:]

    def last(cmd):
        found = [c for c in runtime if c.cmd == cmd]
        return found[-1] if found else None

    for c in runtime:
        if c.cmd == "RUN" and "apt-get install" in " ".join(c.value):
            words = set(" ".join(c.value).replace("\\", " ").split())
            shipped = sorted(words & BUILD_TOOLS)
            if shipped:
                errors.append(f"{path}:{c.start_line}: runtime stage installs build tools {shipped}")
    user = last("USER")
    uid = user.value[0].split(":")[0] if user else ""
    if not uid.isdigit() or int(uid) == 0:
        errors.append(f"{path}: runtime USER must be a numeric non-root uid, is {user.value if user else None}")
    exposed = {p for c in runtime if c.cmd == "EXPOSE" for p in c.value}
    if not {"8000", "8001"} <= exposed:
        errors.append(f"{path}: EXPOSE {sorted(exposed)}, expected 8000 and 8001")
    health = last("HEALTHCHECK")
    if not health or not health.json or health.value[0] != "CMD":
        errors.append(f"{path}: HEALTHCHECK missing or not in exec form")
    stop = last("STOPSIGNAL")
    if not stop or stop.value[0] != "SIGTERM":
        errors.append(f"{path}: STOPSIGNAL is not SIGTERM")
    entrypoint = last("ENTRYPOINT")
    if not entrypoint or not entrypoint.json or not entrypoint.value[0].endswith("/sluice-server"):
        errors.append(f"{path}: ENTRYPOINT must be the exec form of sluice-server (PID 1 gets SIGTERM)")
    cmd = last("CMD")
    if not cmd or not cmd.json or "--config" not in cmd.value:
        errors.append(f"{path}: CMD must pass --config in exec form")
    return errors


def main():
    errors = [e for path in sys.argv[1:] for e in check(path)]
    for error in errors:
        print(f"FAIL {error}")
    print(f"check_dockerfiles: {len(sys.argv) - 1} Dockerfiles: {'FAILED' if errors else 'ok'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
