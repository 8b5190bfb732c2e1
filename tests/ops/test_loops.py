"""Heartbeats of the long-running loops (issue 14, ``ops/loops.py``): when a loop counts as
stalled. The loops themselves are tested running, with their health served, in
``tests/console/test_durable_submissions.py`` (the reconciler) and
``tests/audit/test_checkpoints.py`` (the checkpoint job)."""

from orbit_console.ops.loops import Heartbeat


def test_a_loop_is_ready_while_a_round_succeeded_recently_and_stalled_after() -> None:
    heartbeat = Heartbeat("test-loop", stale_after=10)
    started = heartbeat.started
    assert heartbeat.state(now=started + 5)[0]  # just started: not stalled yet
    ready, body = heartbeat.state(now=started + 11)
    assert not ready and body["status"] == "stalled" and body["last_success"] is None

    heartbeat.beat()
    beat = heartbeat.last_success
    assert beat is not None
    heartbeat.failed(TimeoutError())
    ready, body = heartbeat.state(now=beat + 9)
    assert ready and body["status"] == "ready" and body["last_error"] == "TimeoutError"
    assert body["seconds_since_success"] == 9
    assert not heartbeat.state(now=beat + 10.5)[0]
