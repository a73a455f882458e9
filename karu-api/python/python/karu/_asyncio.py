"""The glue between Karu's threads and asyncio: a native call settles a future of the
caller's loop."""

from __future__ import annotations

import asyncio


def _settle(future: asyncio.Future, ok: bool, value) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


async def _awaiting(start):
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def done(ok, value):
        try:
            loop.call_soon_threadsafe(_settle, future, ok, value)
        except RuntimeError:
            pass  # the loop has closed: nobody is waiting any more

    task = start(done)
    try:
        return await future
    except asyncio.CancelledError:
        task.cancel()
        raise
