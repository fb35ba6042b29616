"""The sweep's terminal bar (progress.follow) starts no tqdm monitor thread and takes no
multiprocessing lock: a CI run once hung for good at a sweep's end, the main thread and tqdm's
monitor thread both waiting on tqdm's default write lock with no thread left holding it."""
from __future__ import annotations

import json
import threading
import time

from benchlib import progress


def _monitors() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.name == "tqdm_monitor"}


def test_the_sweep_s_bar_runs_no_monitor_thread_and_takes_only_a_thread_lock(tmp_path):
    relay = tmp_path / "relay.json"
    before = _monitors()  # other bars in this process (other tests) may have started one
    with progress.follow(relay, "drain postgres", interval=0.02):
        relay.write_text(json.dumps({"n": 1, "total": 2, "postfix": "cell 1"}))
        time.sleep(0.2)
        relay.write_text(json.dumps({"n": 2, "total": 2, "postfix": "cell 2"}))
        time.sleep(0.2)
        assert _monitors() <= before
    assert isinstance(progress._FollowBar.get_lock(), type(threading.RLock()))


def test_a_note_without_progress_reaches_the_sweep_s_bar_at_once(tmp_path, capsys):
    """The kernel's bar writes a note that moved no count to the relay file, and the sweep's
    terminal bar draws it: tqdm draws on an update only when the count moved."""
    relay = tmp_path / "relay.json"
    pbar = progress.Relay(total=4, desc="pressure postgres", path=str(relay))
    progress.advanced(pbar, "pgmq clean", 1)
    progress.advanced(pbar, "pgmq idle_tx", 1)  # the count moving: tqdm's own pace
    progress.advanced(pbar, "pgmq calibrate 1,000/s pass", 0)
    assert json.loads(relay.read_text()) == {"n": 2, "total": 4, "desc": "pressure postgres",
                                             "postfix": "pgmq calibrate 1,000/s pass"}
    pbar.close()
    # the sweep's side, in a process of its own in a real run
    relay.write_text(json.dumps({"n": 2, "total": 4, "postfix": "pgmq idle_tx"}))
    terminal = progress.follow(relay, "pressure postgres")
    terminal._poll()
    capsys.readouterr()
    relay.write_text(json.dumps({"n": 2, "total": 4, "postfix": "pgmq calibrate 1,000/s pass"}))
    terminal._poll()
    assert "pgmq calibrate 1,000/s pass" in capsys.readouterr().err
    terminal._bar.close()
