#!/usr/bin/env python3
"""The habits of ccache users and of the command line (issue 24), through the
real binary:

- one meaning per short option across every command: read from the
  commands' own option tables (`progcache CMD --list-options`), so an option
  added to any command is checked without a list here; docs/CLI.md's table
  ("Short options") says the same;
- the man page's synopsis names every option of every command's table, and
  only those, with the same short forms;
- `progcache help help` works; a missing directory names --dir once;
- a bare `prune` trims to the directory's cap and says how much; with no
  cap it says so and removes nothing;
- `stats` is short by default (no remote or PCH counters at zero, unless a
  remote tier is configured), `-v` prints every counter, `--json` has every
  counter either way;
- export and import of many entries that are not artifacts say so in one
  line with a count, not once per entry.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
import progcache_test as pt  # noqa: E402
from progcache_test import check  # noqa: E402

BIN = pt.BIN
SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMON = {"dir", "quiet", "help", "shared-group"}  # global options, documented once
GLOBAL_SHORTS = {"d": "dir", "q": "quiet", "h": "help", "V": "version"}


def run(args, env=None, cwd=None):
    return pt.run(args, env, timeout=300, drop=("PROGCACHE_REMOTE",), cwd=cwd)


def commands():
    """The commands `progcache --help` lists."""
    rc, out, _ = run(["--help"])
    block = out.split("commands:\n", 1)[1].split("\n\n", 1)[0]
    return [l.split()[0] for l in block.splitlines() if l.strip()]


def option_tables():
    """{command: {long name: (short or None, takes a value)}} from the binary."""
    tables = {}
    for cmd in commands():
        rc, out, err = run([cmd, "--list-options"])
        check(rc == 0 and out, "%s --list-options" % cmd, err)
        table = {}
        for line in out.splitlines():
            short, long_, arg = line.split()
            table[long_[2:]] = (None if short == "-" else short[1:], arg == "1")
        tables[cmd] = table
    return tables


def test_short_options(tables):
    meaning = {}
    for short, long_ in GLOBAL_SHORTS.items():
        meaning.setdefault(short, {}).setdefault(long_, set()).add("(global)")
    for cmd, table in tables.items():
        for long_, (short, _) in table.items():
            if short:
                meaning.setdefault(short, {}).setdefault(long_, set()).add(cmd)
    for short, longs in sorted(meaning.items()):
        check(len(longs) == 1, "-%s means one thing" % short, longs)
    # docs/CLI.md's table: the same short options, long forms and commands.
    text = open(os.path.join(SRC, "docs", "CLI.md")).read()
    section = text.split("### Short options", 1)[1].split("\n#", 1)[0]
    documented = {}
    for m in re.finditer(r"^\| `-(\w)` \| `--([a-z-]+)[^`]*` \| ([^|]+) \|$", section, re.M):
        documented[m.group(1)] = (m.group(2), m.group(3).strip())
    check(set(documented) == set(meaning), "CLI.md lists every short option, no other",
          (sorted(set(meaning) - set(documented)), sorted(set(documented) - set(meaning))))
    for short, (long_, where) in documented.items():
        if short not in meaning:
            continue
        real = meaning[short]
        check(set(real) == {long_}, "CLI.md: -%s is --%s" % (short, long_), real)
        if long_ in COMMON or short == "V":
            continue
        cmds = set(c.strip() for c in where.split(","))
        check(cmds == real.get(long_, set()), "CLI.md: the commands of -%s" % short,
              (cmds, real.get(long_)))


def synopsis_blocks():
    """{command: [(short or None, long name)]} from the man page's SYNOPSIS."""
    text = open(os.path.join(SRC, "docs", "progcache.1")).read()
    syn = text.split(".SH SYNOPSIS\n", 1)[1].split("\n.SH ", 1)[0]
    blocks = {}
    for part in syn.split(".B progcache\n")[2:]:
        cmd = part.split("\n", 1)[0].split()[1]
        opts = blocks.setdefault(cmd, [])
        for m in re.finditer(r"(?:\\-(\w) \| )?\\-\\-([a-z\\-]+)", part):
            opts.append((m.group(1), m.group(2).replace("\\-", "-")))
    return blocks


def test_man_synopsis(tables):
    blocks = synopsis_blocks()
    check(set(blocks) >= set(tables), "the synopsis has every command",
          sorted(set(tables) - set(blocks)))
    for cmd, table in tables.items():
        shown = {}
        for short, long_ in blocks.get(cmd, []):
            shown[long_] = short or shown.get(long_)
        want = set(table) - COMMON
        check(want <= set(shown), "the synopsis of %s has every option" % cmd,
              sorted(want - set(shown)))
        check(set(shown) - {"dir"} <= set(table), "the synopsis of %s has no other" % cmd,
              sorted(set(shown) - {"dir"} - set(table)))
        for long_, short in shown.items():
            if long_ in table and table[long_][0]:
                check(short == table[long_][0], "the synopsis gives %s --%s as -%s" %
                      (cmd, long_, table[long_][0]), short)


def test_help_and_dir(tmp):
    rc, out, err = run(["help", "help"])
    check(rc == 0 and out.startswith("usage: progcache help"), "help help", (rc, out, err))
    env = {"HOME": "", "XDG_CACHE_HOME": "", "PROGCACHE_DIR": ""}
    rc, out, err = run(["stats"], env=env)
    check(rc == 2 and err.count("--dir") == 1 and err.count("no cache directory") == 1,
          "a missing directory names --dir once", err)


def put_junk(cache, tmp, n, size=1000):
    path = os.path.join(tmp, "payload")
    for i in range(n):
        with open(path, "wb") as f:
            f.write(bytes([i % 256]) * size)
        rc, _, err = run(["put", "-d", cache, "%064x" % (i + 1), path])
        check(rc == 0, "put", err)


def stats_json(cache, env=None):
    rc, out, err = run(["stats", "-d", cache, "--json"], env=env)
    check(rc == 0, "stats --json", err)
    return json.loads(out)


def test_prune_to_cap(tmp):
    cache = os.path.join(tmp, "prune")
    put_junk(cache, tmp, 20)
    before = stats_json(cache)
    check(before["entries"] == 20 and before["total_size"] >= 20000, "20 entries", before)
    run(["config", "-d", cache, "max_size", "8K"])
    rc, out, err = run(["prune", "-d", cache])
    after = stats_json(cache)
    check(rc == 0 and after["total_size"] <= 8192 and after["entries"] > 0,
          "bare prune trims to the cap", (rc, out, err, after))
    removed = before["entries"] - after["entries"]
    check(out.startswith("cap 8.0 KiB: removed %d entries" % removed),
          "bare prune says the cap and how much it removed", out)
    rc, out, err = run(["prune", "-d", cache, "--json"])
    check(rc == 0 and json.loads(out)["removed"] == 0, "a second bare prune removes nothing", out)
    run(["config", "-d", cache, "max_size", "none"])
    rc, out, err = run(["prune", "-d", cache])
    check(rc == 0 and "no size cap" in err and "removed 0 entries" in out,
          "bare prune without a cap", (rc, out, err))
    rc, out, err = run(["prune", "-d", cache, "-M", "2K"])
    check(rc == 0 and stats_json(cache)["total_size"] <= 2048, "prune -M", (rc, out, err))


def test_stats_short(tmp):
    cache = os.path.join(tmp, "stats")
    put_junk(cache, tmp, 2)
    run(["get", "-d", cache, "%064x" % 1])
    rc, short, err = run(["stats", "-d", cache, "--no-charts"])
    labels = [l[:22].strip() for l in short.splitlines()]
    check(rc == 0 and {"hits", "misses", "stores"} <= set(labels), "stats: the main counters",
          short)
    check(not [l for l in labels if l.startswith(("remote", "PCH", "lookup errors"))],
          "stats: no zero remote, PCH or error counters by default", short)
    rc, full, _ = run(["stats", "-d", cache, "-v", "--no-charts"])
    check(rc == 0 and "remote hits" in full and "PCH hits" in full and "lookup errors" in full,
          "stats -v: every counter", full)
    check(len(full.splitlines()) > len(short.splitlines()) + 20, "stats -v is the long form")
    remote = {"PROGCACHE_REMOTE": "redis://127.0.0.1:1/0"}
    rc, out, _ = run(["stats", "-d", cache, "--no-charts"], env=remote)
    check(rc == 0 and "remote hits" in out and "PCH hits" not in out,
          "stats: remote counters when a remote tier is configured", out)
    s = stats_json(cache)
    for key in ("hits", "lookup_errors", "remote_hits", "remote_takeovers", "pch_hits",
                "pch_fallbacks"):
        check(key in s, "stats --json has %s at zero too" % key)


def test_folded_warnings(tmp):
    cache = os.path.join(tmp, "junk")
    put_junk(cache, tmp, 30, 100)
    # ls and verify use the same words for entries of no known kind.
    rc, out, err = run(["ls", "-d", cache])
    rows = out.splitlines()[1:]
    check(rc == 0 and len(rows) == 30 and all("(unknown, kept: " in r for r in rows)
          and "(bad:" not in out, "ls: unknown, kept, as verify says", out + err)
    rc, out, _ = run(["verify", "-d", cache])
    check(out.count(", kept (--fix-unknown removes it)") == 30, "verify: unknown, kept", out)
    archive = os.path.join(tmp, "junk.tar")
    rc, out, err = run(["export", "-d", cache, archive])
    lines = [l for l in err.splitlines() if "warning" in l]
    check(rc == 0 and len(lines) == 1 and "30 entries are not valid artifacts" in lines[0],
          "export: one warning line with a count", err)
    rc, out, err = run(["import", "-d", os.path.join(tmp, "junk2"), archive])
    lines = [l for l in err.splitlines() if "warning" in l]
    check(rc == 0 and len(lines) == 1 and "30 entries are not valid artifacts" in lines[0],
          "import: one warning line with a count", err)
    # The flag named is the one that removes them: they are of no known kind,
    # which verify --fix keeps (issue 35).
    check("'progcache verify --fix-unknown' removes them" in lines[0], "import: the right flag",
          err)
    rc, out, err = run(["verify", "-d", os.path.join(tmp, "junk2"), "--fix-unknown"])
    check(rc == 0 and "30 of them removed" in out, "verify --fix-unknown removes them", out + err)
    single = os.path.join(tmp, "one")
    put_junk(single, tmp, 1, 100)
    rc, out, err = run(["export", "-d", single, os.path.join(tmp, "one.tar")])
    check(rc == 0 and re.search(r"warning: entry [0-9a-f]{64} is not a valid artifact", err),
          "export: one entry is named", err)
    rc, out, err = run(["import", "-d", os.path.join(tmp, "one2"), os.path.join(tmp, "one.tar")])
    check(rc == 0 and "imported 1 entry (" in out, "import: 1 entry, not 1 entries", out + err)


def main():
    pt.need_bin()
    tables = option_tables()
    test_short_options(tables)
    test_man_synopsis(tables)
    return pt.run_tests((test_help_and_dir, test_prune_to_cap, test_stats_short,
                         test_folded_warnings), "test_tool_habits", "progcache-habits-")


if __name__ == "__main__":
    sys.exit(main())
