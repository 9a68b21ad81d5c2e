"""Ordinary agent tasks, each a few bash commands as a coding or research agent runs
them, and how to tell what became of one.

Every task runs in a fresh agent (its own scratch) through the real ``lw.bash``; its
commands run in order and it *worked* when each exited 0 and the last one printed
what a developer's machine prints. Otherwise it was *refused* when lw.bash said why
(a pre-check refusal, or a ``hint`` naming a documented gap of the backend), else it
*failed*. ``benchmarks/agent_tasks.py`` runs all of them on both backends;
``tests/test_bash_agent_tasks.py`` a lean selection (``ci``: needs nothing beyond what
the Makefile's ``system-deps`` installs).
"""

from __future__ import annotations

# ruff: noqa: E501  (the corpus reads best one command per line)
import shutil
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from lw_temporal import BashResult
from lw_temporal.ids import DataLayout

PLANNER = "planner"
WORKER = "worker"
Outcome = Literal["worked", "refused", "failed"]


@dataclass(frozen=True)
class Task:
    name: str
    commands: tuple[str, ...]
    #: What the last command's stdout must contain.
    expect: str
    role: str = PLANNER
    #: Programs the task needs (a task is skipped where one is missing).
    needs: tuple[str, ...] = ()
    ci: bool = False


def task(
    name: str,
    *commands: str,
    expect: str,
    role: str = PLANNER,
    needs: Sequence[str] = (),
    ci: bool = False,
) -> Task:
    return Task(name, commands, expect, role, tuple(needs), ci)


_PY = ("python3",)
TASKS: tuple[Task, ...] = (
    # -- git -------------------------------------------------------------------------
    task(
        "git-init-commit-log",
        "git init -q -b main repo && cd repo && echo 'print(1)' > app.py && git add app.py",
        "cd repo && git commit -qm 'first commit' && git log --format='%an|%s'",
        expect="cr planner|first commit",
        needs=("git",),
        ci=True,
    ),
    task(
        "git-branch-merge",
        "git init -q -b main r && cd r && echo a > a && git add a && git commit -qm a",
        "cd r && git checkout -qb feature && echo b > b && git add b && git commit -qm b",
        "cd r && git checkout -q main && git merge -q --no-edit feature && git log --oneline | wc -l",
        expect="2",
        needs=("git",),
    ),
    task(
        "git-diff-stash",
        "git init -q r && cd r && echo v1 > f && git add f && git commit -qm v1",
        "cd r && echo v2 > f && git diff --stat && git stash -q && cat f && git stash pop -q && cat f",
        expect="v1\nv2",
        needs=("git",),
    ),
    task(
        "git-own-identity",
        "git init -q r && cd r && git config user.name 'Review Bot' && "
        "git config user.email bot@example.com && touch x && git add x && git commit -qm x && "
        "git log --format='%an <%ae>'",
        expect="Review Bot <bot@example.com>",
        needs=("git",),
    ),
    task(
        "git-clone-tag-describe",
        "git init -q src && cd src && echo 1 > v && git add v && git commit -qm one && git tag v1.0",
        "git clone -q src copy && cd copy && git describe --tags",
        expect="v1.0",
        needs=("git",),
        ci=True,
    ),
    task(
        "git-grep-blame",
        "git init -q r && cd r && printf 'a\\n# TODO: fix\\nb\\n' > m.py && git add . && "
        "git commit -qm m",
        "cd r && git grep -n TODO && git blame -L '/TODO/',+1 --porcelain m.py | grep -c author",
        expect="m.py:2:# TODO: fix",
        needs=("git",),
    ),
    task(
        "git-format-patch-am",
        "git init -q a && cd a && echo 1 > f && git add f && git commit -qm base && "
        "git clone -q . ../b && echo 2 >> f && git commit -qam change && git format-patch -1 -o ..",
        "cd b && git am -q ../0001-change.patch && cat f",
        expect="1\n2",
        needs=("git",),
    ),
    task(
        "git-toplevel-from-a-subfolder",
        "git init -q r && mkdir -p r/src/pkg && cd r/src/pkg && git rev-parse --show-toplevel",
        expect="/mnt/scratch/own/r",
        needs=("git",),
    ),
    # -- python ----------------------------------------------------------------------
    task(
        "python-sqlite",
        "python3 - <<'EOF'\nimport sqlite3\ndb = sqlite3.connect('app.db')\n"
        "db.execute('create table t (n integer)')\ndb.executemany('insert into t values (?)', "
        "[(1,), (2,), (3,)])\ndb.commit()\nprint(db.execute('select sum(n) from t').fetchone()[0])\nEOF",
        expect="6",
        needs=_PY,
        ci=True,
    ),
    task(
        "python-multiprocessing-pool",
        'python3 -c \'import multiprocessing as m\nif __name__ == "__main__":\n'
        "    with m.Pool(2) as p: print(sum(p.map(abs, [-1, -2, -3])))'",
        expect="6",
        needs=_PY,
        ci=True,
    ),
    task(
        "python-multiprocessing-queue-lock",
        "cat > mp.py <<'EOF'\nimport multiprocessing as mp\n\ndef work(q, lock):\n"
        "    with lock:\n        q.put(21 * 2)\n\nif __name__ == '__main__':\n"
        "    q, lock = mp.Queue(), mp.Lock()\n    p = mp.Process(target=work, args=(q, lock))\n"
        "    p.start(); print(q.get()); p.join()\nEOF",
        "python3 mp.py",
        expect="42",
        needs=_PY,
    ),
    task(
        "python-multiprocessing-pipe",
        "python3 -c 'import multiprocessing as m\ndef f(c): c.send(7); c.close()\n"
        'if __name__ == "__main__":\n    a, b = m.Pipe(); p = m.Process(target=f, args=(b,)); '
        "p.start(); print(a.recv()); p.join()'",
        expect="7",
        needs=_PY,
    ),
    task(
        "python-asyncio-subprocess",
        "python3 - <<'EOF'\nimport asyncio\nasync def main():\n"
        "    p = await asyncio.create_subprocess_exec('echo', 'from-child', "
        "stdout=asyncio.subprocess.PIPE)\n    out, _ = await p.communicate()\n"
        "    r = await asyncio.gather(*(asyncio.sleep(0, i) for i in range(3)))\n"
        "    print(out.decode().strip(), sum(r))\nasyncio.run(main())\nEOF",
        expect="from-child 3",
        needs=_PY,
        ci=True,
    ),
    task(
        "python-venv-without-pip",
        "python3 -m venv --without-pip .venv && .venv/bin/python -c 'import sys; "
        "print(sys.prefix != sys.base_prefix)'",
        expect="True",
        needs=_PY,
        ci=True,
    ),
    task(
        "python-venv-with-pip",
        "python3 -m venv env && env/bin/pip --version",
        expect="pip ",
        needs=_PY,
    ),
    task(
        "python-tempfile-threads",
        "python3 -c 'import tempfile, concurrent.futures as f\n"
        'with tempfile.NamedTemporaryFile("w+") as t:\n    t.write("x"*5); t.flush()\n'
        "    with f.ThreadPoolExecutor(4) as e: print(sum(e.map(len, [open(t.name).read()]*4)))'",
        expect="20",
        needs=_PY,
    ),
    task(
        "python-identity",
        "python3 -c 'import getpass, os, pwd, socket; "
        'print(getpass.getuser(), pwd.getpwuid(os.getuid()).pw_name, os.path.expanduser("~"))\'',
        expect="agent agent /mnt/scratch/own",
        needs=_PY,
        ci=True,
    ),
    task(
        "python-unittest",
        "mkdir -p proj/tests && cd proj && printf 'def add(a, b):\\n    return a + b\\n' > calc.py "
        "&& touch tests/__init__.py && printf 'import unittest, calc\\nclass T(unittest.TestCase):\\n"
        "    def test_add(self):\\n        self.assertEqual(calc.add(2, 2), 4)\\n' > tests/test_calc.py",
        "cd proj && python3 -m unittest -q 2>&1 | tail -1",
        expect="OK",
        needs=_PY,
    ),
    task(
        "python-stdlib-config-files",
        "python3 -c 'import mimetypes, ssl, platform, locale; ssl.create_default_context(); "
        'print(mimetypes.guess_type("a.json")[0], platform.system(), '
        "locale.getpreferredencoding())'",
        expect="application/json Linux UTF-8",
        needs=_PY,
        ci=True,
    ),
    task(
        "python-archives",
        "mkdir -p d && echo hi > d/a.txt && python3 -c 'import shutil, zipfile; "
        'shutil.make_archive("out", "gztar", "d"); zipfile.ZipFile("o.zip", "w")'
        '.write("d/a.txt"); print(len(zipfile.ZipFile("o.zip").namelist()))\'',
        expect="1",
        needs=_PY,
    ),
    task(
        "python-localhost-server",
        "python3 - <<'EOF'\nimport http.server, threading, urllib.request\n"
        "s = http.server.HTTPServer(('localhost', 0), http.server.SimpleHTTPRequestHandler)\n"
        "threading.Thread(target=s.serve_forever, daemon=True).start()\n"
        "print(urllib.request.urlopen(f'http://localhost:{s.server_port}/').status)\nEOF",
        expect="200",
        needs=_PY,
    ),
    task(
        "python-script-reads-mounted-file",
        "printf 'print(open(\"/mnt/memory/workflow/notes.md\").read().strip())\\n' > show.py",
        "python3 show.py",
        expect="seeded notes",
        needs=_PY,
    ),
    task(
        "python-script-path-argument",
        "printf 'import sys\\nprint(open(sys.argv[1]).read().strip())\\n' > show.py",
        "python3 show.py /mnt/memory/workflow/notes.md",
        expect="seeded notes",
        needs=_PY,
        ci=True,
    ),
    task(
        "python-writes-tmp-itself",
        'python3 -c \'open("/tmp/cache.txt", "w").write("c"); print(open("/tmp/cache.txt").read())\'',
        expect="c",
        needs=_PY,
    ),
    # -- make, cc, node ----------------------------------------------------------------
    task(
        "cc-hello",
        "printf '#include <stdio.h>\\nint main(void){puts(\"hello from c\");return 0;}\\n' > h.c "
        "&& cc -O2 -o h h.c && ./h",
        expect="hello from c",
        needs=("cc",),
    ),
    task(
        "make-c-project",
        "mkdir -p p/src && cd p && printf 'int f(void){return 41;}\\n' > src/f.c && "
        "printf 'int f(void);\\n#include <stdio.h>\\nint main(void){printf(\"%%d\\\\n\", f()+1);}\\n'"
        " > src/main.c",
        "cd p && printf 'app: src/main.o src/f.o\\n\\t$(CC) -o $@ $^\\nclean:\\n\\trm -f app src/*.o\\n'"
        " > Makefile && make -s -j2 && ./app && make -s clean && ls src",
        expect="42\nf.c\nmain.c",
        needs=("cc", "make"),
    ),
    task(
        "make-directory-option",
        "mkdir -p sub && printf 'all:\\n\\t@echo built in $(notdir $(CURDIR))\\n' > sub/Makefile",
        "make -C sub",
        expect="built in sub",
        needs=("make",),
        ci=True,
    ),
    task(
        "cc-static-library",
        "printf 'int sq(int x){return x*x;}\\n' > sq.c && cc -c sq.c && ar rcs libsq.a sq.o && "
        "printf 'int sq(int);\\nint main(void){return sq(3)==9?0:1;}\\n' > m.c && "
        "cc m.c -L. -lsq -o m && ./m && echo linked",
        expect="linked",
        needs=("cc", "ar"),
    ),
    task(
        "node-eval",
        "node -e \"const c=require('crypto'); console.log(c.createHash('sha256').update('x')"
        ".digest('hex').slice(0,8), require('os').userInfo().username)\"",
        expect="2d711642 agent",
        needs=("node",),
    ),
    task(
        "node-script-fs",
        "printf \"const fs=require('fs'); fs.writeFileSync('o.json', JSON.stringify({n: 3}));"
        " console.log(JSON.parse(fs.readFileSync('o.json')).n)\\n\" > s.js && node s.js",
        expect="3",
        needs=("node",),
    ),
    # -- archives ----------------------------------------------------------------------
    task(
        "tar-gzip-directory",
        "mkdir -p src/a && echo x > src/a/f && tar czf out.tgz -C src . && mkdir dst && "
        "tar xzf out.tgz -C dst && tar tzf out.tgz | sort | tail -1 && cat dst/a/f",
        expect="./a/f\nx",
        needs=("tar", "gzip"),
        ci=True,
    ),
    task(
        "zip-unzip",
        "mkdir -p z && echo y > z/f && zip -qr z.zip z && rm -r z && unzip -q z.zip && cat z/f",
        expect="y",
        needs=("zip", "unzip"),
    ),
    task(
        "gzip-roundtrip",
        "seq 1000 > n.txt && gzip -k n.txt && gunzip -c n.txt.gz | tail -1",
        expect="1000",
        needs=("gzip",),
    ),
    # -- shell -------------------------------------------------------------------------
    task(
        "pipeline-word-count",
        "printf 'b a\\nc a\\na b\\n' | tr ' ' '\\n' | sort | uniq -c | sort -rn | head -1",
        expect="3 a",
        ci=True,
    ),
    task(
        "heredoc-expanding",
        "name=world; cat > greet.txt <<EOF\nhello $name\nEOF\ncat greet.txt",
        expect="hello world",
    ),
    task(
        "heredoc-literal",
        "cat <<'EOF' > s.sh\necho \"$((6 * 7))\"\nEOF\nbash s.sh",
        expect="42",
        ci=True,
    ),
    task(
        "awk-sed-report",
        "printf 'x,1\\ny,2\\nz,3\\n' > d.csv && sed -i 's/,/ /' d.csv && awk '{s+=$2} END {print s}' d.csv",
        expect="6",
    ),
    task(
        "find-exec-xargs",
        "mkdir -p a/b && touch a/1.py a/b/2.py a/c.txt && find a -name '*.py' -print0 | "
        "xargs -0 -n1 basename | sort | tr '\\n' ' '",
        expect="1.py 2.py",
    ),
    task(
        "grep-and-find-from-a-subfolder",
        "mkdir -p sub/pkg && echo '# TODO one' > sub/top.py && echo '# TODO two' > sub/pkg/in.py",
        "cd sub/pkg && grep -rn TODO .. | sort && find .. -name '*.py' | sort",
        expect="../pkg/in.py:1:# TODO two\n../top.py:1:# TODO one\n../pkg/in.py\n../top.py",
        ci=True,
    ),
    task(
        "ls-recursive-parent",
        "mkdir -p a/b && touch a/b/f && cd a/b && ls -R .. | head -4",
        expect="..:\nb\n\n../b:",
    ),
    task(
        "subshells-and-pushd",
        "mkdir -p x/y && (cd x && pushd y >/dev/null && pwd && popd >/dev/null && pwd) && pwd",
        expect="/mnt/scratch/own/x/y\n/mnt/scratch/own/x\n/mnt/scratch/own",
    ),
    task(
        "process-substitution-diff",
        "diff <(printf 'a\\nb\\n') <(printf 'a\\nc\\n') | grep -c '^[<>]'",
        expect="2",
    ),
    task(
        "tmp-by-path",
        "echo scratchpad > /tmp/notes.txt && ls /tmp && cat /tmp/notes.txt",
        expect="notes.txt\nscratchpad",
        ci=True,
    ),
    task(
        "mktemp-tmpdir",
        'f=$(mktemp) && echo t > "$f" && cat "$f" && case "$f" in /tmp/*) echo in-tmp;; esac',
        expect="t\nin-tmp",
    ),
    task(
        "identity-commands",
        "whoami && id -un && id -gn && hostname && echo $USER $LOGNAME $HOME",
        expect="agent\nagent\nagent\nsandbox\nagent agent /mnt/scratch/own",
        ci=True,
    ),
    task(
        "bash-functions-arrays",
        'f() { local -a xs=("$@"); echo "${#xs[@]}:${xs[-1]}"; }; f a b c',
        expect="3:c",
    ),
    task(
        "perl-one-liner",
        "printf 'a=1\\nb=2\\n' | perl -ne 'print \"$1\\n\" if /b=(\\d)/'",
        expect="2",
        needs=("perl",),
    ),
    task(
        "file-magic",
        "printf '#!/bin/sh\\necho\\n' > s && file -b s",
        expect="script",
        needs=("file",),
    ),
    task(
        "sqlite-cli",
        "sqlite3 t.db 'create table k(v); insert into k values (5); select v*2 from k'",
        expect="10",
        needs=("sqlite3",),
    ),
    task(
        "windows-style-and-route-words",
        "echo /v /out:file //server/share '/C=XX/CN=x' /aws/lambda/x '~> 1.0' | wc -w",
        expect="7",
        ci=True,
    ),
    task(
        "ssh-keygen-identity",
        "ssh-keygen -q -t ed25519 -N '' -f key && cut -d' ' -f3 key.pub",
        expect="agent@sandbox",
        needs=("ssh-keygen",),
    ),
    task(
        "background-jobs-wait",
        "(sleep 0.2; echo late) & echo early; wait",
        expect="early\nlate",
    ),
    task(
        "json-tool",
        'echo \'{"b": 1, "a": [1, 2]}\' | python3 -m json.tool --sort-keys --compact',
        expect='{"a":[1,2],"b":1}',
        needs=_PY,
    ),
    task(
        "git-worktree",
        "git init -q -b main r && cd r && touch f && git add f && git commit -qm f && "
        "git worktree add -q ../r-feature -b feature && cd ../r-feature && git branch --show-current",
        expect="feature",
        needs=("git",),
    ),
    task(
        "python-src-layout-package",
        "mkdir -p src/hello && echo 'def hi(): return \"hi from src\"' > src/hello/__init__.py",
        "PYTHONPATH=src python3 -c 'import hello; print(hello.hi())'",
        expect="hi from src",
        needs=_PY,
    ),
    task(
        "disk-and-cpu-facts",
        "test $(nproc) -ge 1 && df -P . | tail -1 | awk '{print ($2 > 0)}'",
        expect="1",
    ),
    # -- memory, as a planner (its workflow memory is writable) ------------------------
    task(
        "memory-read",
        "cat /mnt/memory/workflow/notes.md /mnt/memory/org/policy.md",
        expect="seeded notes\norg policy",
        ci=True,
    ),
    task(
        "memory-tee-append",
        "echo 'lesson: cache the build' | tee -a /mnt/memory/workflow/notes.md >/dev/null",
        "tail -1 /mnt/memory/workflow/notes.md",
        expect="lesson: cache the build",
        ci=True,
    ),
    task(
        "memory-sed-in-place",
        "sed -i 's/seeded/edited/' /mnt/memory/workflow/notes.md",
        "cat /mnt/memory/workflow/notes.md",
        expect="edited notes",
    ),
    task(
        "memory-mkdir-mv",
        "mkdir -p /mnt/memory/workflow/topics && echo t > /mnt/memory/workflow/draft.md && "
        "mv /mnt/memory/workflow/draft.md /mnt/memory/workflow/topics/t.md",
        "ls /mnt/memory/workflow/topics",
        expect="t.md",
    ),
    task(
        "memory-rm-folder",
        "mkdir -p /mnt/memory/workflow/old && echo o > /mnt/memory/workflow/old/o.md",
        "rm -r /mnt/memory/workflow/old && ls /mnt/memory/workflow",
        expect="notes.md",
        ci=True,
    ),
    task(
        "memory-copy-to-scratch-as-worker",
        "cp /mnt/memory/workflow/notes.md mine.md && grep -c notes mine.md",
        expect="1",
        role=WORKER,
    ),
    task(
        "memory-python-writes-through-argument",
        'python3 -c \'import sys; open(sys.argv[1], "a").write("py line\\n")\' '
        "/mnt/memory/workflow/notes.md",
        "tail -1 /mnt/memory/workflow/notes.md",
        expect="py line",
        needs=_PY,
    ),
)


def seed_stores(layout: DataLayout) -> None:
    """The stores every task starts from: a note in the workflow memory of ``cr``, a
    policy in org memory (written as a host admin would, before the task)."""
    workflow = layout.root / "memory" / "workflows" / "cr"
    workflow.mkdir(parents=True, exist_ok=True)
    (workflow / "notes.md").write_text("seeded notes\n")
    layout.org_memory.mkdir(parents=True, exist_ok=True)
    (layout.org_memory / "policy.md").write_text("org policy\n")


def available(item: Task) -> bool:
    return all(shutil.which(program) for program in item.needs)


RunCommands = Callable[[str, Sequence[str]], Awaitable[Sequence[BashResult]]]


async def run_task(run: RunCommands, agent: str, item: Task) -> tuple[Outcome, str]:
    """Run ``item`` as ``agent`` through ``run`` (which runs commands in order as that
    agent), and say what became of it, with the detail that tells why."""
    results = list(await run(agent, item.commands))
    return judge(item, results)


def judge(item: Task, results: Sequence[BashResult]) -> tuple[Outcome, str]:
    for result in results:
        if result.rejection is not None:
            return "refused", result.rejection
        if result.exit_code != 0:
            if result.hint is not None:
                return "refused", result.hint
            return "failed", f"exit {result.exit_code}: {result.stderr.strip()[-400:]}"
    last = results[-1]
    if item.expect not in last.stdout:
        return "failed", f"printed {last.stdout.strip()[-200:]!r}, expected {item.expect!r}"
    return "worked", ""
