#!/usr/bin/env python3
"""Unit checks of window.py, no cluster needed: python3 e2e/longhorn/window_test.py

The data check on replica directories made here (a snapshot chain, a replica that lost a block,
one that lost a file), the sampler on a real Longhorn v1.12.1 snapshot, the figures on a
sample file. With WINDOW_LONGHORN (or /opt/lg/bin/longhorn-1.12.1/longhorn) present, the data
is also written through the real engine binary's rest frontend into two replica directories and
each is checked (ports 29600-29620 and 9414 on 127.0.0.1 must be free).
"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import window  # noqa: E402

MIB = window.MIB
SNAP = os.path.join(HERE, "..", "..", "tests", "data", "longhorn-v1.12.1", "rebuilding.json")
LONGHORN = os.environ.get("WINDOW_LONGHORN", "/opt/lg/bin/longhorn-1.12.1/longhorn")


def disk(d, name, parent, writes, size):
    """A sparse disk file NAME of SIZE bytes with WRITES (offset, bytes), and its .meta."""
    with open(os.path.join(d, name), "wb") as f:
        f.truncate(size)
        for off, b in writes:
            f.seek(off)
            f.write(b)
    with open(os.path.join(d, name + ".meta"), "w", encoding="utf-8") as f:
        json.dump({"Name": name, "Parent": parent}, f)


def replica_dir(d, size, seed, mib):
    """A replica as Longhorn leaves it after a rebuild: the first half of the data in a
    snapshot, the rest in the head, plus a block of the snapshot overwritten in the head with
    the same bytes (a newer copy)."""
    data = b"".join(window.chunks(seed, mib))
    half = (mib // 2) * MIB
    disk(d, "volume-snap-a.img", "", [(0, data[:half])], size)
    disk(d, "volume-head-001.img", "volume-snap-a.img", [(half, data[half:]), (4096, data[4096:8192])], size)
    with open(os.path.join(d, "volume.meta"), "w", encoding="utf-8") as f:
        json.dump({"Size": size, "Head": "volume-head-001.img", "Parent": "volume-snap-a.img"}, f)
    return data


class DataCheck(unittest.TestCase):
    size, seed, mib = 16 * MIB, "vol-x", 4

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        replica_dir(self.d, self.size, self.seed, self.mib)
        self.want = window.expected(self.size, self.seed, self.mib)

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_chain_holding_every_byte_matches(self):
        self.assertEqual(window.digest(self.size, self.d), self.want)

    def test_a_lost_block_reads_as_a_hole_and_does_not_match(self):
        with open(os.path.join(self.d, "volume-snap-a.img"), "r+b") as f:
            data = f.read()
        hole = MIB  # a block only the snapshot holds: the file made again without it
        disk(self.d, "volume-snap-a.img", "", [(0, data[:hole]), (hole + 4096, data[hole + 4096:2 * MIB])], self.size)
        self.assertNotEqual(window.digest(self.size, self.d), self.want)

    def test_stale_bytes_do_not_match(self):
        with open(os.path.join(self.d, "volume-head-001.img"), "r+b") as f:
            f.seek(3 * MIB)
            f.write(bytes(range(256)) * 16)
        self.assertNotEqual(window.digest(self.size, self.d), self.want)

    def test_a_lost_snapshot_file_is_an_error(self):
        os.remove(os.path.join(self.d, "volume-snap-a.img.meta"))
        with self.assertRaises(OSError):
            window.digest(self.size, self.d)

    def test_a_looping_chain_is_an_error(self):
        disk(self.d, "volume-snap-a.img", "volume-head-001.img", [], self.size)
        with self.assertRaises(ValueError):
            window.digest(self.size, self.d)

    def test_write_heads_gives_the_expected_content(self):
        with tempfile.TemporaryDirectory() as d:
            disk(d, "volume-head-000.img", "", [], self.size)
            with open(os.path.join(d, "volume.meta"), "w", encoding="utf-8") as f:
                json.dump({"Head": "volume-head-000.img"}, f)
            window.write_heads(self.seed, self.mib, [d])
            self.assertEqual(window.digest(self.size, d), self.want)


@unittest.skipUnless(os.access(LONGHORN, os.X_OK), "no Longhorn engine binary")
class ThroughTheEngine(unittest.TestCase):
    def test_the_rest_frontend_writes_every_replica(self):
        size, seed, mib = 32 * MIB, "vol-engine", 5
        with tempfile.TemporaryDirectory() as t:
            dirs = [os.path.join(t, f"r{i}") for i in (1, 2)]
            for d in dirs:
                os.mkdir(d)
            with open(os.path.join(t, "log"), "w", encoding="utf-8") as log:
                self.assertTrue(window.write(LONGHORN, "vol-engine", size, seed, mib, 29600, dirs, log))
            want = window.expected(size, seed, mib)
            for d in dirs:
                self.assertEqual(window.digest(size, d), want, d)


class Figures(unittest.TestCase):
    def test_the_sampler_reads_a_real_snapshot(self):
        lines = window.sample_lines(window.load_list(SNAP), 100)
        self.assertEqual(len(lines), 1, lines)
        t, vol, state, rob, healthy, rb = lines[0].split()
        self.assertEqual((t, vol, state, rob), ("100", "vol-c", "attached", "degraded"))
        self.assertEqual(healthy, "1/2")  # the rebuilding replica has no healthyAt yet
        self.assertRegex(rb, r"^tcp://[0-9.]+:[0-9]+:3$")

    def test_the_report_counts_spans_rebuilds_and_faults(self):
        with tempfile.TemporaryDirectory() as t:
            s, e = os.path.join(t, "s"), os.path.join(t, "e")
            with open(s, "w", encoding="utf-8") as f:
                f.write("10 v attached healthy 2/2 -\n11 - unanswered\n"
                        "12 v attached degraded 1/2 a:0\n13 v attached degraded 1/2 a:50\n"
                        "15 v attached healthy 2/2 -\n16 w attached faulted 0/2 -\n17 w attached faulted 0/2 -\n")
            with open(e, "w", encoding="utf-8") as f:
                f.write("10 window-start\n10 cordon node-1\n14 refused node-1 - v: attached to node-1\n"
                        "15 move v node-1 node-2 the guard's 429\n16 drained node-1\n17 cordon node-2\n"
                        "18 refused node-2 - v: last healthy replica is on node-2; its replica on node-1 failed 2s ago\n"
                        "19 refused node-2 - w: its replica on node-1 has no running instance manager (state error)\n"
                        "30 stuck node-2\n40 window-end\n")
            lines, faulted = window.report(s, e)
            self.assertEqual(faulted, 1)
            self.assertIn("window: 30 s", lines)
            self.assertIn("node-1: cordon to drained 6 s", lines)
            self.assertIn("node-2: cordon to STUCK (no progress) 13 s", lines)
            self.assertIn("v: degraded 3 s in 1 spans; no healthy replica 0 s in 0 spans; rebuilds 1: a=3s", lines)
            self.assertIn("w: degraded 0 s in 0 spans; no healthy replica 2 s in 1 spans; rebuilds 0: -", lines)
            with open(os.path.join(t, "p"), "w", encoding="utf-8") as f:
                json.dump({"nodes": [{"node": "node-1", "drainableNow": False, "waitsFor": [["v", "attached"]]},
                                     {"node": "node-2", "drainableNow": True, "waitsFor": []}], "batch": ["node-2"],
                           "rolling": [{"node": "node-2", "rebuilds": ["v"], "rebuildsFromSecondRound": []}]}, f)
            self.assertEqual(window.plan(os.path.join(t, "p"), e),
                             ["plan batch: node-2", "node-1: plan waits for v; rolling: -; met: v (workload)",
                              "node-2: plan drainable now; rolling: v; met: v (rebuild; moved here) "
                              "w (instance manager starting)"])


if __name__ == "__main__":
    unittest.main()
