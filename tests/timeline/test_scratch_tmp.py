from tests.timeline.test_consumer import communicator, run, RECEIVE_TIMEOUT, make_person, sync_to_async, revoke_person, console_submission

def test_scratch(world, people, settings, orbit_server, live_db):
    settings.ORBIT_API_URL = orbit_server.url
    settings.TIMELINE_RECHECK_SECONDS = 1
    auditor = make_person(world, "auditor")
    socket = communicator(world["tasks"]["needs_review"], auditor)

    async def scenario():
        connected, _ = await socket.connect(timeout=RECEIVE_TIMEOUT)
        await sync_to_async(revoke_person)(auditor.user)
        closed = await socket.receive_output(timeout=RECEIVE_TIMEOUT)
        print("CLOSED", closed)
        await sync_to_async(console_submission)(world, people["operator"].user)
        try:
            print("GOT", await socket.receive_output(timeout=3))
        except BaseException as e:
            print("NOTHING", repr(e))

    run(scenario)
