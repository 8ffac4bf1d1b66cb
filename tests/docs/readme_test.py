#!/usr/bin/python3
"""The docs test: README.md (and every folder README) checked against the repository and run as written.

  tests/docs/readme_test.py --root ROOT --build BUILD [--no-run] [--only REGEX] [--keep DIR]

1. Every repository path the docs name (backend/..., deploy/..., loadtest/..., tests/..., ...) exists.
2. Every --flag of sluice-server, sluice-loadtest, sluice-advisor, sluice-bench-backend, sluice-bench-scheduler,
   sluice-bench-sampler and sluice-echo-server named in a command (a code block's command, an inline `sluice-loadtest ...` span) is in that
   binary's --help; in the load-testing and advisor sections a bare inline `--flag` must be one of the tool's flags
   or of a script the section names.
3. Every YAML file the docs name parses (PyYAML), and every yaml code block without "..." placeholders.
4. Every relative Markdown link ([text](path#anchor)) points at a file or folder of the repository, and its
   #anchor (or a bare #anchor) at a heading of the Markdown file it names (GitHub's heading slugs).
5. Every key of a yaml block that is a sluice config (a server config: it has model_repository; a model's
   config.yaml: name with kind or instances; a speech: or generation: section) is a key the config parsers in
   backend/base/*.cc name (their CheckKeys lists), so a documented key that was renamed or never existed fails.
6. Every --flag given to a repository script in a command (loadtest/.../bench.sh --repeats 3, python3 X.py --out)
   is in that script's text; a bare inline `--flag` in a section whose heading names a script (`peer_bench.sh`)
   must be in that script.
7. Every sh code block of README.md and of the folder READMEs runs as written, command by command, from a folder where the repository's top-level entries
   and build/ are reachable by their README names, against a sluice-server started on the example config with the
   example models on loopback. It runs inside its own network namespace (unshare -n), so the README's fixed ports
   8000/8001 are the test's own. A command exits 0, or 0/1 when it judges an SLO (--slo: 1 is a verdict, not a
   failure of the command). No timing is asserted.

A block that cannot run here is marked in the README, on the line before its fence, with a visible reason:
  <!-- docs-test: skip (needs a Kubernetes cluster) -->
and one that runs wherever a tool is at hand (PATH, or BUILD/deploy-tools/bin where helm_chart_test installs helm):
  <!-- docs-test: needs helm (why) -->
Their paths and flags are still checked, as are those of a synopsis, a block that shows optional arguments in
brackets ("export_models.py --out DIR [--models a,b]"), which cannot run as written and is not run.
--no-run does checks 1-6 only (CTest docs_paths_test: seconds, no
server). Exit codes: 0 all passed, 1 a check failed, 2 bad arguments.
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
    "sluice-bench-sampler": "scheduler/sluice-bench-sampler",
    "sluice-echo-server": "loadtest/sluice-echo-server",
}
SECTION_TOOLS = [  # inline bare --flags under these headings are the tool's (or another tool's the section names)
    (re.compile(r"^Bucket advisor"), "sluice-advisor"),
    (re.compile(r"^(Load testing|Speech API \((Riva|OpenAI)\)|Generation \(LLM\))"), "sluice-loadtest"),
]
SKIP_MARK = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->")
NEEDS_MARK = re.compile(r"<!--\s*docs-test:\s*needs\s+(?P<tool>[\w.-]+)\s*\((?P<reason>[^)]+)\)\s*-->")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
PLACEHOLDER = re.compile(r"[<>*{}\[\]$…]|\.\.\.|/N(/|$)|PATH|DIR\b|FILE\b")
FLAG = re.compile(r"(?<![\w-])--[A-Za-z][A-Za-z0-9-]*")
SYNOPSIS = re.compile(r"\s\[--?[A-Za-z]")  # "tool --out DIR [--lengths L,...]": a synopsis, not a command
COMMAND_TIMEOUT_S = 120


class Doc:
    def __init__(self, path, root):
        self.path = path
        self.rel = os.path.relpath(path, root)
        # READMEs are checked whole and run; other Markdown files (dated results) for their paths and links only:
        # a results file keeps the command as it was run, flags since renamed included.
        self.is_readme = os.path.basename(path) == "README.md"
        self.lines = open(path, encoding="utf-8").read().split("\n")
        self.blocks = []   # dicts: lang, start (1-based line of the fence), text, skip (reason or None), section
        self.inline = []   # (line number, code span text, section)
        self.headings = []  # heading texts, in order (not those inside code blocks)
        self.prose = []    # (line number, text) of the lines outside code blocks
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
                self.headings.append(section)
            self.prose.append((i + 1, line))
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


def heading_anchors(headings):
    """GitHub's anchors for these headings: lowercased, punctuation dropped, spaces to '-', repeats get -1, -2."""
    anchors, seen = set(), {}
    for text in headings:
        slug = re.sub(r"[^\w\- ]", "", text.replace("`", "").strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
SCRIPT = re.compile(r"^[\w./-]+\.(?:sh|py)$")


def script_of(words):
    """The repository script a command runs (loadtest/bench.sh, python3 backend/compile/x.py), or None."""
    words = [w for w in words if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]
    if words and re.match(r"^(\S*/)?python3?$", words[0]):
        words = words[1:]
    if words and SCRIPT.match(words[0]):
        return words[0]
    return None


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
        elif script_of(words):
            found.append(("script:" + script_of(words), [f for f in FLAG.findall(part)]))
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
        self.counts = {"paths": 0, "flags": 0, "links": 0}

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

    def script_text(self, script):
        path = os.path.join(self.root, script)
        if not os.path.isfile(path):
            return None  # a missing script is the path check's failure
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def check_flags(self, where, program, flags):
        if program.startswith("script:"):
            script = program[len("script:"):]
            text = self.script_text(script)
            for f in flags if text is not None else []:
                self.counts["flags"] += 1
                if not re.search(re.escape(f) + r"(?![\w-])", text):
                    self.fail(where, f"{script} has no {f} (not in the script)")
            return
        known = self.help_flags(program)
        if known is None:
            return
        for f in flags:
            self.counts["flags"] += 1
            if f not in known:
                self.fail(where, f"{program} has no {f} (not in its --help)")

    def check_doc(self, doc):
        if not doc.is_readme:
            for block in doc.blocks:
                for path in repo_paths(block["text"]):
                    self.check_path(f"{doc.rel}:{block['start']}", path)
            for line, span, section in doc.inline:
                for path in repo_paths(span):
                    self.check_path(f"{doc.rel}:{line}", path)
            return
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
            if block["lang"] == "yaml":
                self.check_config_keys(where, block["text"])
        for line, span, section in doc.inline:
            where = f"{doc.rel}:{line}"
            for path in repo_paths(span):
                self.check_path(where, path)
            words = span.split()
            if words and program_of(words[:1]):
                self.check_flags(where, program_of(words[:1]), FLAG.findall(span))
            elif span.startswith("--") and FLAG.fullmatch(span.split()[0].split("=")[0]):
                named = re.search(r"`([\w-]+\.(?:sh|py))`$", section)  # "Against Triton: `peer_bench.sh`"
                if named:  # a section about one script: its flags
                    self.check_section_script_flag(where, named.group(1), span.split()[0].split("=")[0])
                    continue
                for pattern, tool in SECTION_TOOLS:
                    if pattern.search(section):
                        self.check_section_flag(where, tool, span.split()[0].split("=")[0], doc, line)
                        break

    def find_script(self, name):
        if not hasattr(self, "_files"):
            self._files = {}
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = [d for d in dirnames if not d.startswith((".", "build"))]
                for f in filenames:
                    self._files.setdefault(f, os.path.relpath(os.path.join(dirpath, f), self.root))
        return self._files.get(name)

    def check_section_script_flag(self, where, name, flag):
        script = self.find_script(name)
        if script is None:
            self.fail(where, f"the section names {name}, which is not in the repository")
            return
        text = self.script_text(script)
        self.counts["flags"] += 1
        if not re.search(re.escape(flag) + r"(?![\w-])", text):
            # A flag of sluice-loadtest the script passes on is fine.
            known = self.help_flags("sluice-loadtest")
            if not (known and flag in known):
                self.fail(where, f"{flag} (in the section on {name}) is in neither {script} nor sluice-loadtest")

    def check_links(self, doc, anchors_of):
        for line, text in doc.prose:
            where = f"{doc.rel}:{line}"
            for target in LINK.findall(re.sub(r"`[^`]*`", "", text)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # https:, mailto:
                self.counts["links"] += 1
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(os.path.dirname(doc.path), path)) if path else doc.path
                if not full.startswith(self.root + os.sep) and full != self.root:
                    self.fail(where, f"link {target} leaves the repository")
                    continue
                if not os.path.exists(full):
                    self.fail(where, f"link {target}: {os.path.relpath(full, self.root)} is not in the repository")
                    continue
                if anchor:
                    if not full.endswith(".md") or os.path.isdir(full):
                        self.fail(where, f"link {target}: an anchor on a file that is not Markdown")
                    elif anchor not in anchors_of(full):
                        self.fail(where, f"link {target}: no heading with anchor #{anchor} in "
                                         f"{os.path.relpath(full, self.root)}")

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

    def config_keys(self):
        """Every quoted name in the config parsers (backend/base/*.cc): the keys a sluice config may hold."""
        if not hasattr(self, "_config_keys"):
            names = set()
            base = os.path.join(self.root, "backend", "base")
            for name in sorted(os.listdir(base)) if os.path.isdir(base) else []:
                if name.endswith(".cc"):
                    with open(os.path.join(base, name), encoding="utf-8") as f:
                        names |= set(re.findall(r'"([a-z_][a-z0-9_]*)"', f.read()))
            self._config_keys = names
        return self._config_keys

    def check_config_keys(self, where, text):
        try:
            documents = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
        except yaml.YAMLError:
            return  # a block with placeholders that is not YAML: nothing to check
        for doc in documents:
            keys = set(doc)
            is_config = "model_repository" in keys or ("name" in keys and keys & {"kind", "instances"}) or \
                keys <= {"speech", "generation", "sim", "batching", "buckets", "instances"}
            if not is_config:
                continue
            found = []

            def walk(node):
                if isinstance(node, dict):
                    for key, value in node.items():
                        found.append(str(key))
                        walk(value)
                elif isinstance(node, list):
                    for item in node:
                        walk(item)
            walk(doc)
            for key in found:
                self.counts["config keys"] = self.counts.get("config keys", 0) + 1
                if key not in self.config_keys():
                    self.fail(where, f"config key {key!r} is not a key the config parsers (backend/base/*.cc) know")

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
        if SYNOPSIS.search(block["text"]):
            print(f"docs-test: not run {where}: a synopsis (optional arguments in [--...])", flush=True)
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
            paths += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".md") and f != "README.md"]
    docs = [Doc(p, root) for p in paths]
    checker = Checker(root, build)
    anchors = {}

    def anchors_of(path):
        if path not in anchors:
            known = [d for d in docs if d.path == path]
            anchors[path] = heading_anchors((known[0] if known else Doc(path, root)).headings)
        return anchors[path]

    for doc in docs:
        checker.check_doc(doc)
        checker.check_links(doc, anchors_of)
    checker.check_named_yaml(docs)
    blocks = sum(len(d.blocks) for d in docs)
    skipped = sum(1 for d in docs for b in d.blocks if b["skip"])
    print(f"docs-test: {len(docs)} documents, {blocks} code blocks ({skipped} marked skip), "
          f"{sum(len(d.inline) for d in docs)} inline code spans: {checker.counts['paths']} repository paths and "
          f"{checker.counts['flags']} flags, {checker.counts['links']} links and "
          f"{checker.counts.get('config keys', 0)} config keys checked", flush=True)
    if not args.no_run:
        runner = Runner(checker, args.keep)
        try:
            if runner.start_server():
                for doc in [d for d in docs if d.is_readme]:  # README.md's blocks, then each folder README's
                    for block in doc.blocks:
                        runner.run_block(doc, block, args.only)
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
