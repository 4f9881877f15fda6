"""What one visitor's changes cost: after an upload, a change of layer, head, view, query or
threshold hashes nothing again (the main view and every panel that follows it find the pass by the key
in the visitor's state), checks view, layer and head once per event (not again in the panels that
follow it), and runs no forward (bench/bench_hot_paths.py, run here); the state's digest is used only
for the very file it was made from."""

from __future__ import annotations

import os
import time

import pytest

from attention.vit.serve.inputs import file_digest, source_stamp
from attention.vit.serve.passes import Ref, known_digest


@pytest.mark.slow
def test_one_upload_and_five_changes_hash_once_check_once_per_answer_and_forward_once(capsys):
    from bench import bench_hot_paths

    counts = bench_hot_paths.run()
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.split()[:1] != ["event"]]
    changes = [r for r in rows if r and r[0] not in ("upload", "total", "counts:")]
    assert counts["sha1"] == 1 and counts["forwards"] == 1 and counts["relevance"] == 1
    # parsed once, at the edge: the main view's answer checks view, layer and head once per event; the
    # panels that follow it (compare, step by step) trust its accepted view (`ui.vit.fields.on_screen`)
    table = [r for r in rows if len(r) > 6 and all(x.isdigit() for x in r[-6:]) and r[0] != "total"]
    per_event = [dict(zip(("view", "layer", "head"), map(int, r[-5:-2]))) for r in table]
    assert len(per_event) == 6 and all(e == dict(view=1, layer=1, head=1) for e in per_event), per_event
    assert counts["view"] == counts["layer"] == counts["head"] == 6
    assert len(changes) >= 5


def test_the_states_digest_serves_only_the_file_it_was_made_from(tmp_path):
    f = tmp_path / "upload.png"
    f.write_bytes(b"first picture")
    st = Ref((file_digest(str(f)), "m", "auto", "v"), (2, 2), 1, 1, source=source_stamp(str(f)))
    assert known_digest(st, str(f)) == file_digest(str(f))
    assert known_digest(st, str(tmp_path / "other.png")) is None  # another path
    assert known_digest(Ref(st.key, st.grid, 1, 1), str(f)) is None  # a state without a stamp (an example's)
    time.sleep(0.01)
    f.write_bytes(b"another picture")  # the same path rewritten: size and time differ
    os.utime(f, ns=(time.time_ns(), time.time_ns()))
    assert known_digest(st, str(f)) is None
    assert known_digest(st, None) is None and known_digest(None, str(f)) is None
