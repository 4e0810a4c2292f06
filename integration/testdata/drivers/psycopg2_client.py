# psycopg2 and SQLAlchemy (with psycopg2) against dpproxy
# (TestDrivers_Psycopg2NamedCursors): named cursors (DECLARE "name" CURSOR
# WITHOUT HOLD FOR …, FETCH FORWARD itersize, MOVE, CLOSE), a WITH HOLD
# cursor read after COMMIT, SQLAlchemy's stream_results (a named cursor)
# and begin_nested (a savepoint). Prints one line per step.
import sys

import psycopg2
import sqlalchemy
from sqlalchemy import text

Q = "SELECT department, COUNT(*) AS n FROM visits WHERE age > %s GROUP BY department"

conn = psycopg2.connect(sys.argv[1])
cur = conn.cursor()
cur.execute("SET dp.epsilon = 0.05")
named = conn.cursor("named_dp")
named.itersize = 2
named.execute(Q, (25,))
rows = list(named)
print("named rows", len(rows), ",".join(d.name for d in named.description))
named.scroll(0, mode="absolute")
print("named again", len(named.fetchall()))
named.close()
conn.commit()
held = conn.cursor("held_dp", withhold=True)
held.execute(Q, (35,))
conn.commit()
print("held after commit", len(held.fetchmany(4)), len(held.fetchall()))
held.close()
bad = conn.cursor("bad_dp")
try:
    bad.execute("SELECT * FROM visits")
    bad.fetchall()
    print("named refused none")
except psycopg2.Error as e:
    print("named refused", e.pgcode)
conn.rollback()
conn.close()

url = sys.argv[2]
engine = sqlalchemy.create_engine(url, future=True)
with engine.connect() as c:
    c.execute(text("SET dp.epsilon = 0.05"))
    res = c.execute(text("SELECT sex, COUNT(*) AS n FROM patients GROUP BY sex").execution_options(
        stream_results=True, max_row_buffer=2))
    print("stream rows", len(res.fetchall()))
    with c.begin_nested():
        c.execute(text("SET dp.epsilon = 0.3"))
    try:
        with c.begin_nested():
            c.execute(text("SELECT * FROM patients"))
    except sqlalchemy.exc.DBAPIError as e:
        print("nested refused", e.orig.pgcode)
    print("after nested", c.execute(text("SHOW dp.epsilon")).scalar())
    c.commit()
print("sqlalchemy", sqlalchemy.__version__)
