#!/usr/bin/env python3
"""zsh and fish completion (tools/_progcache, tools/progcache.fish), as
test_tool_cli checks the bash one: the files parse (zsh -n, fish -n); the
subcommands, the options of every subcommand (the long options its --help
lists, no more, no fewer) and the values of --sort, --target, the setting
names and help's commands are completed. fish runs its real completion
(complete -C "progcache ..."); zsh runs the function that computes the
candidates (_progcache_candidates), which _progcache hands to compadd.
scripts/deps.sh installs both shells; a shell that is missing is said, and
the test skips (77) when neither is there.
"""

import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

BIN = pt.BIN
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZSH = os.path.join(SRC, "tools", "_progcache")
FISH = os.path.join(SRC, "tools", "progcache.fish")
COMMANDS = ["stats", "ls", "verify", "prune", "clear", "get", "put", "export", "import", "warm",
            "key", "remote", "config", "doctor"]


def env():
    e = dict(os.environ)
    e["PATH"] = os.path.dirname(os.path.abspath(BIN)) + os.pathsep + e.get("PATH", "")
    return e


def shell(args):
    p = subprocess.run(args, capture_output=True, text=True, env=env(), timeout=60)
    check(p.returncode == 0, "%s runs" % args[:2], p.stderr)
    return p.stdout


def fish_complete(line):
    out = shell(["fish", "-c", "source %s; complete -C %s" % (FISH, quote(line))])
    return set(l.split("\t")[0] for l in out.splitlines() if l)


def zsh_complete(line):
    """What the zsh completion offers for the last word of line (compadd's
    prefix match done here)."""
    words = line.split(" ")
    cmd = ""
    i = 1
    while i < len(words) - 1:
        if words[i] in ("-d", "--dir"):
            i += 2
            continue
        if not words[i].startswith("-"):
            cmd = words[i]
            break
        i += 1
    prev = words[-2] if len(words) > 1 else ""
    cur = words[-1]
    out = shell(["zsh", "-c", 'source %s; _progcache_candidates progcache %s %s %s' %
                 (ZSH, quote(cmd), quote(prev), quote(cur))])
    found = [l for l in out.splitlines() if l]
    if found and found[0].startswith("@"):
        return set(found[:1])
    return set(w for w in found if w.startswith(cur))


def quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def helped_options(cmd):
    """The long options the --help of cmd lists (its option lines)."""
    p = subprocess.run([BIN, cmd, "--help"], capture_output=True, text=True)
    lines = [l for l in p.stdout.splitlines() if re.match(r"^\s+-", l)]
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", "\n".join(lines)))


def test_shell(name, complete):
    check(complete("progcache st") == {"stats"}, name + ": a subcommand", complete("progcache st"))
    check(complete("progcache -d /tmp ver") == {"verify"}, name + ": after -d DIR")
    check(complete("progcache ls --sort ") == {"name", "size", "age", "lru"},
          name + ": ls --sort values")
    check(complete("progcache key -t ") == {"cubin", "ptx", "ltoir"}, name + ": key -t values")
    check("max_size" in complete("progcache config max"), name + ": setting names")
    check(complete("progcache help imp") == {"import"}, name + ": help COMMAND")
    check(not complete("progcache prune --max-size "), name + ": no words for a size")
    check("--version" in complete("progcache --v"), name + ": options before the command")
    for cmd in COMMANDS:
        helped = helped_options(cmd)
        completed = set(w for w in complete("progcache %s --" % cmd) if w.startswith("--"))
        # The options every command takes (some helps leave out --quiet)
        # may be offered beyond its --help; nothing else.
        extra = completed - helped - {"--dir", "--quiet", "--help", "--shared-group"}
        check(helped <= completed and not extra,
              "%s: completion of %s matches its --help" % (name, cmd),
              (sorted(helped - completed), sorted(extra)))


def main():
    pt.need_bin()
    ran = 0
    for name, script, complete in (("zsh", ZSH, zsh_complete), ("fish", FISH, fish_complete)):
        if not shutil.which(name):
            print("note: no %s (scripts/deps.sh installs it); %s completion not tested"
                  % (name, name))
            continue
        shell([name, "-n", script])
        test_shell(name, complete)
        ran += 1
    if not ran:
        pt.skip("neither zsh nor fish is installed (scripts/deps.sh installs them)")
    return pt.finish("test_tool_completion")


if __name__ == "__main__":
    sys.exit(main())
