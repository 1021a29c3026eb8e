"""Figures and acceptance of one e2e/faults-cluster.sh scenario.

    faults_report.py SCENARIO SAMPLES EVENTS MAX_VIEW_AGE [cutoff=GUARD]

SAMPLES: one line per eviction sample (ms, guard, /readyz code, allowed, code, seconds,
reason, ms of the /readyz request). EVENTS: "ms name" lines: fault (the fault starts), fail (the change is acknowledged:
from then on the eviction must be denied naming vol-healthy), heal (the fault is undone:
rules removed, members or API server started), whole (etcd answers on every member again, or
the API server is ready: the fault has ended).
Prints, per guard: allows on a view that missed the change (and how long after it), false
denials with their reasons, answer times, /readyz over time, the time to a correct answer after
the fault ends. Exit 1 when an acceptance check fails:
  - no allow later than MAX_VIEW_AGE after the change;
  - the cut-off guard (cutoff=) is not ready within 2 x MAX_VIEW_AGE of the fault, and the
    other one answers correctly throughout (an allow before the change, the denial naming
    vol-healthy from MAX_VIEW_AGE after it);
  - a correct answer within MAX_VIEW_AGE + 2 s after the fault ends (after the change, when
    it is written later), and only correct answers from then on;
  - the guard behind the Service (steered=) answers correctly during the fault from
    MAX_VIEW_AGE + 2 s after the Service took B out (event steered) and after the change: it
    reconnected to the healthy API server.
"""

import collections
import sys

scenario, samples_path, events_path, max_age = sys.argv[1:5]
max_age = float(max_age)
cutoff = next((a.split("=", 1)[1] for a in sys.argv[5:] if a.startswith("cutoff=")), None)
steered = next((a.split("=", 1)[1] for a in sys.argv[5:] if a.startswith("steered=")), None)
events = {}
for line in open(events_path):
    ms, name = line.split()
    events.setdefault(name, int(ms) / 1000)
t_fault, t_fail, t_heal = events["fault"], events.get("fail"), events["heal"]
t_whole = events.get("whole", t_heal)
# Samples sent while the change was being written may see it or not: left out.
t_sent = events.get("fail-sent", t_fail)
rows = collections.defaultdict(list)
malformed = 0
for line in open(samples_path):
    if not line.strip():
        continue
    f = line.rstrip("\n").split("\t")
    try:
        if len(f) != 8:
            raise ValueError("not eight fields")
        t, took, t_ready = int(f[0]) / 1000, float(f[5] or 0), int(f[7]) / 1000
    except ValueError:
        t = None
    # A sample answers within curl's bounds (12 s + 3 s): anything else is a torn line.
    if t is None or not (t <= t_ready <= t + 30 and 0 <= took <= 30):
        malformed += 1
        continue
    if t_fail is not None and t_sent <= t < t_fail:
        continue
    rows[f[1]].append((t, f[2], f[3], f[4], took, f[6], t_ready))
failures = []


def check(ok, what):
    print(("ok   - " if ok else "FAIL - ") + f"{scenario}: {what}")
    if not ok:
        failures.append(what)


def changed(t):
    return t_fail is not None and t >= t_fail


def correct(t, allowed, reason):
    if changed(t):
        return allowed == "false" and "vol-healthy" in reason
    return allowed == "true"


def rel(t):
    return f"{t - t_fault:+.1f}s"


def kind(reason):
    for k in ("could not confirm", "vol-healthy", "no answer"):
        if k in reason:
            return k
    return reason[:60] or "(none)"


print(f"== {scenario}: fault at 0s, change acknowledged at "
      f"{rel(t_fail) if t_fail else '(none)'}, fault undone at {rel(t_heal)}, etcd and API servers "
      f"whole again at {rel(t_whole)}; maxViewAge {max_age:.0f}s")
# A torn line hides a sample the checks below would have judged.
check(malformed == 0, f"every sample line parses as one sample ({malformed} torn)")
for guard in sorted(rows):
    r = sorted(rows[guard])
    times = sorted(x[4] for x in r)
    pct = lambda q: times[min(len(times) - 1, int(q * len(times)))]
    print(f"-- {guard}: {len(r)} answers; answer time p50 {pct(0.5):.3f}s, p95 {pct(0.95):.3f}s, max {times[-1]:.3f}s")
    late = [t - t_fail for t, _, a, *_ in r if changed(t) and a == "true"]
    print(f"   allows on a view that missed the change: {len(late)}"
          + (f" (last {max(late):.1f}s after it)" if late else ""))
    false_denials = collections.Counter(kind(x[5]) for x in r if not changed(x[0]) and x[2] != "true")
    print(f"   false denials (before the change): {sum(false_denials.values())} {dict(false_denials)}")
    unconfirmed = collections.Counter(kind(x[5]) for x in r if changed(x[0]) and x[2] == "false" and "vol-healthy" not in x[5])
    print(f"   denials after the change without its reason: {sum(unconfirmed.values())} {dict(unconfirmed)}")
    # /readyz by the time it was asked (each after its sample's eviction was answered).
    readyz = sorted((x[6], x[1]) for x in r)
    seg, last = [], None
    for t, ready in readyz:
        if ready != last:
            seg.append(f"{ready} from {rel(t)}")
            last = ready
    print("   /readyz: " + ", ".join(seg))
    check(all(x <= max_age for x in late),
          f"{guard}: no allow later than {max_age:.0f}s after the change"
          + (f" (latest {max(late):.1f}s)" if late else " (none at all)"))
    # After the fault: the first correct answer (after the change when it comes later).
    undone = next((x for x in r if x[0] >= max(t_heal, t_fail or 0) and correct(x[0], x[2], x[5])), None)
    if undone:
        print(f"   first correct answer {undone[0] - max(t_heal, t_fail or 0):.1f}s after the fault was undone")
    start = max(t_whole, t_fail or 0)
    after = [x for x in r if x[0] >= start]
    first = next((x for x in after if correct(x[0], x[2], x[5])), None)
    if first is None:
        check(False, f"{guard}: a correct answer after the fault ended")
    else:
        took = first[0] - start
        wrong = [x for x in after if x[0] > first[0] and not correct(x[0], x[2], x[5])]
        check(took <= max_age + 2 and not wrong,
              f"{guard}: correct answers {took:.1f}s after the fault ended (etcd whole)"
              + (" (after the change)" if start > t_whole else "")
              + f", within {max_age + 2:.0f}s, and only correct ones after ({len(wrong)} not)")
    back = next((t for t, ready in readyz if t >= t_whole and ready == "200"), None)
    print("   /readyz 200 " + (f"{back - t_whole:.1f}s after the fault ended" if back else "not seen after the fault ended"))
    if steered == guard:
        t_steer = events.get("steered")
        if t_steer is None or t_steer > t_heal:
            print(f"   (the Service never took B out during the fault: nothing to steer around)")
        else:
            since = max(t_steer, t_fail or 0)
            during = [x for x in r if since + max_age + 2 <= x[0] <= t_heal]
            wrong = [x for x in during if not correct(x[0], x[2], x[5])]
            first = next((x[0] for x in r if x[0] >= since and correct(x[0], x[2], x[5])), None)
            check(during and not wrong,
                  f"{guard} (behind the Service, which took B out at {rel(t_steer)}): correct from "
                  f"{max_age + 2:.0f}s after that on ({len(during) - len(wrong)}/{len(during)}; the first "
                  + (f"{first - since:.1f}s after it)" if first else "never)"))
    elif cutoff == guard:
        unready = next((t for t, ready in readyz if t_fault <= t <= t_heal and ready == "503"), None)
        check(unready is not None and unready - t_fault <= 2 * max_age,
              f"{guard} (cut off): /readyz 503 within {2 * max_age:.0f}s of the fault"
              + (f" ({unready - t_fault:.1f}s)" if unready else " (never)"))
    elif cutoff:
        during = [x for x in r if t_fault <= x[0] <= t_heal and not (changed(x[0]) and x[0] < t_fail + max_age)]
        wrong = [x for x in during if not correct(x[0], x[2], x[5])]
        check(during and not wrong and all(ready == "200" for t, ready in readyz if t_fault <= t <= t_heal),
              f"{guard} (healthy side): ready and correct throughout the fault "
              f"({len(during) - len(wrong)}/{len(during)} correct)")
sys.exit(1 if failures else 0)
