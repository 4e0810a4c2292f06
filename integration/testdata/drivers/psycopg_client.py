# psycopg 3 against dpproxy (TestDrivers_Psycopg3): a DP query, a named
# (server-side) cursor over a DP query with a server-side bound parameter
# (DECLARE … FOR … $1, Describe of the cursor's portal, FETCH FORWARD n),
# a binary named cursor, nested transactions (savepoints), and a refused
# query as an ordinary error. Prints one line per step.
import sys

import psycopg

Q = "SELECT department, COUNT(*) AS n FROM visits WHERE age > %s GROUP BY department"

with psycopg.connect(sys.argv[1]) as conn:
    conn.execute("SET dp.epsilon = 0.05")
    rows = conn.execute(Q, (20,)).fetchall()
    print("groups", len(rows))
    with conn.cursor("dp_cursor") as cur:
        cur.itersize = 2
        cur.execute(Q, (30,))
        print("cursor columns", ",".join(d.name for d in cur.description))
        first = cur.fetchmany(3)
        rest = cur.fetchall()
        print("cursor rows", len(first), len(rest))
        cur.scroll(0, mode="absolute")
        print("cursor again", len(cur.fetchall()))
    conn.commit()
    with conn.cursor("bin_cursor", binary=True) as cur:
        cur.execute(Q, (40,))
        got = cur.fetchall()
        print("binary rows", len(got), type(got[0][1]).__name__)
    conn.commit()
    with conn.transaction():
        with conn.transaction():
            conn.execute("SET dp.epsilon = 0.2")
        try:
            with conn.transaction():
                conn.execute("SELECT * FROM visits")
        except psycopg.Error as e:
            print("nested refused", e.sqlstate)
        print("outer usable", conn.execute("SHOW dp.epsilon").fetchone()[0])
    try:
        conn.execute("SELECT * FROM visits")
    except psycopg.Error as e:
        print("refused", e.sqlstate)
    conn.rollback()
    print("after", conn.execute("SELECT 1").fetchone()[0])
