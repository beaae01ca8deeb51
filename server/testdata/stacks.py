# Per-goroutine stack sizes of a Go process, read from a core with gdb (pprof's goroutine
# profile says what each goroutine waits in, not how large its stack is). Goroutines are
# grouped by the function they were started with and the one that started them; groups of
# fewer than 10 are left out. Used with BenchmarkOpenRuns and BATON_BENCH_HOLD:
#
#   gdb -batch -q -ex 'source server/testdata/stacks.py' <test binary> <core>
#
# size: the stack allocated (a power of two); used: from the top of the stack to where the
# goroutine is parked.
import collections

import gdb


def sym(pc):
    s = gdb.execute("info symbol %d" % pc, to_string=True).strip()
    return s.split(" in section")[0].split(" + ")[0]


allgs = gdb.parse_and_eval("'runtime.allgs'")
sizes = collections.defaultdict(collections.Counter)
used = collections.defaultdict(list)
for i in range(int(allgs["len"])):
    g = allgs["array"][i].dereference()
    if int(g["atomicstatus"]["value"]) == 6:  # _Gdead
        continue
    lo, hi = int(g["stack"]["lo"]), int(g["stack"]["hi"])
    name = sym(int(g["startpc"])) + " <- " + sym(int(g["gopc"]))
    sizes[name][hi - lo] += 1
    used[name].append(hi - int(g["sched"]["sp"]))
for name, c in sorted(sizes.items(), key=lambda kv: -sum(kv[1].values())):
    n = sum(c.values())
    if n < 10:
        continue
    u = sorted(used[name])
    print("%6d  %s\n        size %s  mean %.2f KiB  used p50 %d B  max %d B" % (
        n, name, dict(sorted(c.items())), sum(k * v for k, v in c.items()) / n / 1024, u[n // 2], u[-1]))
