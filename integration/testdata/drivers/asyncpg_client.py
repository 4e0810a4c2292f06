# asyncpg against dpproxy (TestDrivers_Asyncpg): connect, a DP query, a
# refused query returns an error (not a hang: asyncpg sends
# Parse/Describe/Flush and waits), and a pool whose release runs asyncpg's
# reset query (pg_advisory_unlock_all, CLOSE ALL, UNLISTEN *, RESET ALL;
# ROLLBACK first when a transaction is left open). Prints one line per step.
import asyncio
import sys

import asyncpg

Q = "SELECT department, COUNT(*) AS n FROM visits GROUP BY department"


async def main(dsn):
    conn = await asyncpg.connect(dsn)
    await conn.execute("SET dp.epsilon = 0.05")
    rows = await conn.fetch(Q)
    print("groups", len(rows), ",".join(rows[0].keys()))
    try:
        await asyncio.wait_for(conn.fetch("SELECT * FROM visits"), 20)
        print("refused none")
    except asyncpg.PostgresError as e:
        print("refused", e.sqlstate)
    except asyncio.TimeoutError:
        print("refused hang")
    print("after", await conn.fetchval("SELECT 1"))
    await conn.close()

    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    async with pool.acquire() as c:
        first = id(c._con)
        await c.execute("SET dp.epsilon = 0.06")  # not the cached answer
        rows = await c.fetch(Q)
        print("pool groups", len(rows))
        await c.execute("SET application_name = 'changed'")
    # Released: the reset query ran; the same connection comes back reset.
    async with pool.acquire() as c:
        print("pool same", id(c._con) == first)
        print("pool reset", await c.fetchval("SHOW application_name") != "changed")
        tr = c.transaction()
        await tr.start()  # left open on release: ROLLBACK is prefixed
        await c.execute("SET dp.epsilon = 0.07")
    async with pool.acquire() as c:
        print("pool after open transaction", await c.fetchval("SHOW dp.epsilon"))
        print("pool idle", not c.is_in_transaction())
    await pool.close()


asyncio.run(main(sys.argv[1]))
