#!/usr/bin/python3
"""The docs test: README.md (and every folder README) checked against the repository and run as written.

  tests/docs/readme_test.py --root ROOT --build BUILD [--no-run] [--only REGEX] [--keep DIR]

1. Every repository path the docs name (backend/..., deploy/..., loadtest/..., tests/..., ...) exists.
2. Every --flag of sluice-server, sluice-loadtest, sluice-advisor, sluice-bench-backend, sluice-bench-scheduler and
   sluice-echo-server named in a command (a code block's command, an inline `sluice-loadtest ...` span) is in that
   binary's --help; in the load-testing and advisor sections a bare inline `--flag` must be one of the tool's flags
   or of a script the section names.
3. Every YAML file the docs name parses (PyYAML), and every yaml code block without "..." placeholders.
4. Every sh code block of README.md runs as written, command by command, from a folder where the repository's top-level entries
   and build/ are reachable by their README names, against a sluice-server started on the example config with the
   example models on loopback. It runs inside its own network namespace (unshare -n), so the README's fixed ports
   8000/8001 are the test's own. A command exits 0, or 0/1 when it judges an SLO (--slo: 1 is a verdict, not a
   failure of the command). No timing is asserted.

A block that cannot run here is marked in the README, on the line before its fence, with a visible reason:
  <!-- docs-test: skip (needs a Kubernetes cluster) -->
and one that runs wherever a tool is at hand (PATH, or BUILD/deploy-tools/bin where helm_chart_test installs helm):
  <!-- docs-test: needs helm (why) -->
Their paths and flags are still checked. Exit codes: 0 all passed, 1 a check failed, 2 bad arguments.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

TOP_DIRS = ("backend", "deploy", "loadtest", "proto", "scheduler", "server", "tests")
BINARIES = {  # program as the docs write it -> path under the build folder
    "sluice-server": "server/sluice-server",
    "sluice-loadtest": "loadtest/sluice-loadtest",
    "sluice-advisor": "loadtest/sluice-advisor",
    "sluice-bench-backend": "backend/sluice-bench-backend",
    "sluice-bench-scheduler": "scheduler/sluice-bench-scheduler",
    "sluice-echo-server": "loadtest/sluice-echo-server",
}
SECTION_TOOLS = [  # inline bare --flags under these headings are the tool's (or another tool's the section names)
    (re.compile(r"^Bucket advisor"), "sluice-advisor"),
    (re.compile(r"^(Load testing|Speech API \(Riva\)|Generation \(LLM\))"), "sluice-loadtest"),
]
SKIP_MARK = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->")
NEEDS_MARK = re.compile(r"<!--\s*docs-test:\s*needs\s+(?P<tool>[\w.-]+)\s*\((?P<reason>[^)]+)\)\s*-->")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
PLACEHOLDER = re.compile(r"[<>*{}\[\]$…]|\.\.\.|/N(/|$)|PATH|DIR\b|FILE\b")
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][A-Za-z0-9-]*")
COMMAND_TIMEOUT_S = 120


class Doc:
    def __init__(self, path, root):
        self.path = path
        self.rel = os.path.relpath(path, root)
        self.lines = open(path, encoding="utf-8").read().split("\n")
        self.blocks = []   # dicts: lang, start (1-based line of the fence), text, skip (reason or None), section
        self.inline = []   # (line number, code span text, section)
        self._parse()

    def _parse(self):
        section = ""
        i = 0
        while i < len(self.lines):
            line = self.lines[i]
            m = FENCE.match(line)
            if m:
                lang, start = m.group(2), i + 1
                body = []
                i += 1
                while i < len(self.lines) and not self.lines[i].strip().startswith("```"):
                    body.append(self.lines[i])
                    i += 1
                skip, needs = None, None
                j = start - 2
                while j >= 0 and not self.lines[j].strip():
                    j -= 1
                if j >= 0:
                    mark = SKIP_MARK.search(self.lines[j])
                    if mark:
                        skip = mark.group("reason")
                    mark = NEEDS_MARK.search(self.lines[j])
                    if mark:
                        needs = (mark.group("tool"), mark.group("reason"))
                self.blocks.append({"lang": lang, "start": start, "text": "\n".join(body), "skip": skip,
                                    "needs": needs, "section": section})
                i += 1
                continue
            heading = re.match(r"^#+\s+(.*)$", line)
            if heading:
                section = heading.group(1).strip()
            for span in re.findall(r"`([^`]+)`", line):
                self.inline.append((i + 1, span, section))
            i += 1


def logical_commands(text):
    """The block's commands: backslash continuations joined, heredocs kept with their command, comments dropped."""
    commands = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.strip().startswith("#"):
            i += 1
            continue
        command = line
        while command.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command.rstrip()[:-1] + " " + lines[i].strip()
        heredoc = re.search(r"<<-?\s*'?\"?(\w+)'?\"?", command)
        if heredoc:
            end = heredoc.group(1)
            while i + 1 < len(lines):
                i += 1
                command += "\n" + lines[i]
                if lines[i].strip() == end:
                    break
        commands.append(command)
        i += 1
    return commands


def program_of(words):
    """The documented binary a command runs ('sluice-loadtest', ...), or None."""
    for w in words:
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w):  # VAR=value before the program
            continue
        if w == "$L":
            return "sluice-loadtest"
        base = os.path.basename(w)
        return base if base in BINARIES else None
    return None


def strip_comment(command):
    out, quote = [], None
    for ch in command:
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (not out or out[-1].isspace()):
            break
        out.append(ch)
    return "".join(out)


def command_flags(command):
    """(program, flags) of each pipeline part of a one-line command."""
    found = []
    for part in re.split(r"\|\||&&|;|\|", strip_comment(command.split("\n")[0])):
        words = part.split()
        program = program_of(words)
        if program:
            found.append((program, [f for f in FLAG.findall(part)]))
    return found


def repo_paths(text):
    for token in re.split(r"[\s`'\"(),;=]+", text):
        token = token.rstrip(".:,")
        token = re.sub(r":\d+(:\d+)?$", "", token)  # file:line
        if not token or PLACEHOLDER.search(token):
            continue
        top = token.split("/")[0]
        if (top in TOP_DIRS and "/" in token) or token in ("CMakeLists.txt", "README.md"):
            yield token


class Checker:
    def __init__(self, root, build):
        self.root, self.build = root, build
        self.failures, self.notes = [], []
        self.help = {}
        self.counts = {"paths": 0, "flags": 0}

    def fail(self, where, message):
        self.failures.append(f"{where}: {message}")
        print(f"FAIL {where}: {message}", flush=True)

    def help_flags(self, program):
        if program not in self.help:
            binary = os.path.join(self.build, BINARIES[program])
            text = ""
            if os.access(binary, os.X_OK):
                for option in ("--help-all", "--help"):
                    r = subprocess.run([binary, option], capture_output=True, text=True, timeout=60)
                    if r.returncode == 0:
                        text = r.stdout + r.stderr
                        break
            self.help[program] = set(FLAG.findall(text)) if text else None
            if not text:
                self.fail(program, f"{binary} --help did not run (build it first)")
        return self.help[program]

    def check_flags(self, where, program, flags):
        known = self.help_flags(program)
        if known is None:
            return
        for f in flags:
            self.counts["flags"] += 1
            if f not in known:
                self.fail(where, f"{program} has no {f} (not in its --help)")

    def check_doc(self, doc):
        for block in doc.blocks:
            where = f"{doc.rel}:{block['start']}"
            for path in repo_paths(block["text"]):
                self.check_path(where, path)
            if block["lang"] in ("sh", "bash", ""):
                for command in logical_commands(block["text"]):
                    for program, flags in command_flags(command):
                        self.check_flags(where, program, flags)
            if block["lang"] == "yaml" and not PLACEHOLDER.search(block["text"].replace("<<.", "")):
                try:
                    list(yaml.safe_load_all(block["text"]))
                except yaml.YAMLError as e:
                    self.fail(where, f"yaml block does not parse: {e}")
        for line, span, section in doc.inline:
            where = f"{doc.rel}:{line}"
            for path in repo_paths(span):
                self.check_path(where, path)
            words = span.split()
            if words and program_of(words[:1]):
                self.check_flags(where, program_of(words[:1]), FLAG.findall(span))
            elif span.startswith("--") and FLAG.fullmatch(span.split()[0].split("=")[0]):
                for pattern, tool in SECTION_TOOLS:
                    if pattern.search(section):
                        self.check_section_flag(where, tool, span.split()[0].split("=")[0], doc, line)
                        break

    def check_section_flag(self, where, tool, flag, doc, line):
        known = self.help_flags(tool)
        if known is None or flag in known:
            return
        # A flag of another tool the same paragraph names (export_models.py --lengths, bench.sh, ...) is fine.
        paragraph = []
        i = line - 1
        while i >= 0 and doc.lines[i].strip():
            paragraph.insert(0, doc.lines[i])
            i -= 1
        i = line
        while i < len(doc.lines) and doc.lines[i].strip():
            paragraph.append(doc.lines[i])
            i += 1
        # An outside tool named in the same sentence (aiperf's, perf_analyzer's flags) is not ours to check.
        sentence = re.split(r"[.;:]\s", doc.lines[line - 1].split(flag)[0] + flag)[-1] + \
            doc.lines[line - 1].split(flag, 1)[-1].split(". ")[0]
        if re.search(r"\b(aiperf|perf_analyzer|helm|docker|podman|pip|transformers|espeak-ng|sox)\b", sentence):
            return
        for script in re.findall(r"([\w/.-]+\.(?:py|sh))", " ".join(paragraph)):
            path = os.path.join(self.root, script)
            if os.path.isfile(path) and flag in open(path, encoding="utf-8", errors="replace").read():
                return
        for other in BINARIES:
            if other != tool and other in " ".join(paragraph):
                other_flags = self.help_flags(other)
                if other_flags and flag in other_flags:
                    return
        self.fail(where, f"{flag} (in a {tool} section) is not a {tool} flag")

    def check_path(self, where, path):
        self.counts["paths"] += 1
        if not os.path.exists(os.path.join(self.root, path)):
            self.fail(where, f"names {path}, which is not in the repository")

    def check_named_yaml(self, docs):
        seen = set()
        for doc in docs:
            for match in re.finditer(r"(?<![\w/.-])((?:%s)/[\w./-]+\.ya?ml)\b" % "|".join(TOP_DIRS),
                                     "\n".join(doc.lines)):
                path = match.group(1)
                if path in seen or not os.path.isfile(os.path.join(self.root, path)):
                    continue
                seen.add(path)
                if "/templates/" in path:
                    continue  # Helm templates are Go templates; helm_chart_test renders them
                try:
                    with open(os.path.join(self.root, path), encoding="utf-8") as f:
                        list(yaml.safe_load_all(f))
                except yaml.YAMLError as e:
                    self.fail(doc.rel, f"{path} does not parse as YAML: {e}")
        print(f"docs-test: {len(seen)} YAML files named by the docs parse", flush=True)


class Runner:
    """Runs the sh blocks against one sluice-server on the example config (in this process's network namespace)."""

    def __init__(self, checker, keep):
        self.c = checker
        self.work = keep or tempfile.mkdtemp(prefix="sluice-docs-test-")
        os.makedirs(self.work, exist_ok=True)
        for entry in os.listdir(checker.root):
            if entry in ("build", ".git") or entry.startswith("build"):
                continue
            link = os.path.join(self.work, entry)
            if not os.path.lexists(link):
                os.symlink(os.path.join(checker.root, entry), link)
        if not os.path.lexists(os.path.join(self.work, "build")):
            os.symlink(checker.build, os.path.join(self.work, "build"))
        self.server = None
        # Tools a block may need: PATH, and what helm_chart_test installs into the build folder.
        self.path = os.pathsep.join([os.path.join(checker.build, "deploy-tools", "bin"), os.environ.get("PATH", "")])
        self.count = 0  # commands run (their output: command_NN.log in the work folder)
        self.assignments = []  # VAR=value commands seen so far (L=build/loadtest/sluice-loadtest), carried along

    def start_server(self):
        config = os.path.join(self.work, "docs_test_server.yaml")
        with open(os.path.join(self.c.root, "deploy/config/example.yaml"), encoding="utf-8") as f:
            text = f.read()
        # The example config, with the repository and pricing file where this test's build and checkout are.
        text = re.sub(r"(?m)^model_repository:.*$", f"model_repository: {self.c.build}/models", text)
        text = text.replace("pricing_file: ../pricing.yaml", f"pricing_file: {self.c.root}/deploy/pricing.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(text)
        log = open(os.path.join(self.work, "server.log"), "w")
        binary = os.path.join(self.c.build, BINARIES["sluice-server"])
        self.server = subprocess.Popen([binary, "--config", config], stdout=log, stderr=subprocess.STDOUT,
                                       cwd=self.work, start_new_session=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                break
            with open(os.path.join(self.work, "server.log"), encoding="utf-8", errors="replace") as f:
                if re.search(r"^sluice-server READY ", f.read(), re.M):
                    print("docs-test: sluice-server READY on the example config", flush=True)
                    return True
            time.sleep(0.3)
        with open(os.path.join(self.work, "server.log"), encoding="utf-8", errors="replace") as f:
            self.c.fail("sluice-server", "not READY on the example config:\n" + f.read()[-3000:])
        return False

    def stop_server(self):
        if self.server and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                code = self.server.wait(timeout=60)
                if code != 0:
                    self.c.fail("sluice-server", f"exited {code} after SIGTERM")
            except subprocess.TimeoutExpired:
                os.killpg(self.server.pid, signal.SIGKILL)
                self.c.fail("sluice-server", "still running 60 s after SIGTERM")

    def run_block(self, doc, block, only):
        where = f"{doc.rel}:{block['start']}"
        if block["lang"] not in ("sh", "bash"):
            return
        if block["skip"]:
            print(f"docs-test: skip {where} ({block['skip']})", flush=True)
            return
        if block["needs"] and not shutil.which(block["needs"][0], path=self.path):
            print(f"docs-test: skip {where}: no {block['needs'][0]} here ({block['needs'][1]})", flush=True)
            return
        for command in logical_commands(block["text"]):
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S+", command.strip()):
                self.assignments.append(command.strip())
                continue
            if only and not re.search(only, command):
                continue
            script = "\n".join(self.assignments + [command])
            start = time.monotonic()
            try:
                r = subprocess.run(["bash", "-c", script], cwd=self.work, capture_output=True, text=True,
                                   timeout=COMMAND_TIMEOUT_S,
                                   env=dict(os.environ, SLUICE_DOCS_TEST="1", PATH=self.path))
                code, out = r.returncode, r.stdout + r.stderr
            except subprocess.TimeoutExpired as e:
                code, out = "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
                    else (e.stdout or "")
            seconds = time.monotonic() - start
            self.count += 1
            with open(os.path.join(self.work, f"command_{self.count:02d}.log"), "w", encoding="utf-8") as f:
                f.write(f"{where}: {command}\nexit {code}\n{out}")
            allowed = (0, 1) if "--slo" in command else (0,)
            first = command.split("\n")[0]
            if code in allowed:
                print(f"docs-test: ok {where} ({seconds:.1f} s, exit {code}): {first[:110]}", flush=True)
            else:
                self.c.fail(where, f"exit {code} after {seconds:.1f} s: {first}\n{out[-4000:]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--no-run", action="store_true", help="check paths, flags and YAML only")
    parser.add_argument("--only", help="run only the commands matching this regex")
    parser.add_argument("--keep", help="work folder to use and keep (default: a temporary one, removed)")
    args = parser.parse_args()
    root, build = os.path.abspath(args.root), os.path.abspath(args.build)
    if not os.path.isfile(os.path.join(root, "README.md")) or not os.path.isdir(build):
        print("--root must hold README.md and --build must be a folder", file=sys.stderr)
        return 2
    paths = [os.path.join(root, "README.md")]
    for top in TOP_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            if "README.md" in filenames:
                paths.append(os.path.join(dirpath, "README.md"))
    docs = [Doc(p, root) for p in paths]
    checker = Checker(root, build)
    for doc in docs:
        checker.check_doc(doc)
    checker.check_named_yaml(docs)
    blocks = sum(len(d.blocks) for d in docs)
    skipped = sum(1 for d in docs for b in d.blocks if b["skip"])
    print(f"docs-test: {len(docs)} documents, {blocks} code blocks ({skipped} marked skip), "
          f"{sum(len(d.inline) for d in docs)} inline code spans: {checker.counts['paths']} repository paths and "
          f"{checker.counts['flags']} flags checked", flush=True)
    if not args.no_run:
        runner = Runner(checker, args.keep)
        try:
            if runner.start_server():
                for block in docs[0].blocks:  # README.md's; the folder READMEs' blocks are synopses (checked above)
                    runner.run_block(docs[0], block, args.only)
        finally:
            runner.stop_server()
            if not args.keep:
                shutil.rmtree(runner.work, ignore_errors=True)
    if checker.failures:
        print(f"docs-test: {len(checker.failures)} failure(s)", flush=True)
        return 1
    print("docs-test: PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
