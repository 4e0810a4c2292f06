# A SQLAlchemy + psycopg2 session against dpproxy, driven by TestSQLAlchemy.
import sys

import sqlalchemy as sa

engine = sa.create_engine(sys.argv[1], pool_pre_ping=True, future=True)
with engine.connect() as conn:
    print("one", conn.execute(sa.text("SELECT 1")).scalar())
    insp = sa.inspect(conn)
    print("tables", ",".join(sorted(insp.get_table_names())))
    print("columns", ",".join(c["name"] for c in insp.get_columns("visits")))
    rows = conn.execute(
        sa.text("SELECT department, COUNT(*) AS n FROM visits WHERE age > :a GROUP BY department"),
        {"a": 30},
    ).fetchall()
    print("rows", len(rows), rows[0].n)
    try:
        conn.execute(sa.text("SELECT * FROM visits"))
        print("not refused")
    except sa.exc.DBAPIError as e:
        print("refused", e.orig.pgcode)
    conn.rollback()
    print("after", conn.execute(sa.text("SHOW dp.epsilon")).scalar())

# pandas.read_sql of a grouped DP query into a DataFrame, on a new pooled
# connection; then a refused query, and the same connection still answers.
import pandas as pd

with engine.connect() as conn:
    df = pd.read_sql(
        sa.text("SELECT department, COUNT(*) AS n, AVG(cost) AS avg_cost FROM visits GROUP BY department"),
        conn,
        coerce_float=True,
    )
    df = df.sort_values("department").reset_index(drop=True)
    first = df.iloc[0]
    print(
        "frame",
        len(df),
        ",".join(df.columns),
        "%s,%d,%s" % (first["department"], first["n"], first["avg_cost"]),
        "%s,%s" % (df["n"].dtype, df["avg_cost"].dtype),
    )
    try:
        pd.read_sql(sa.text("SELECT * FROM visits"), conn)
        print("pandas not refused")
    except sa.exc.DBAPIError as e:
        print("pandas refused", e.orig.pgcode)
    conn.rollback()
    print("pandas after", pd.read_sql(sa.text("SELECT 1 AS one"), conn)["one"][0])
    empty = pd.read_sql(sa.text("SELECT * FROM visits WHERE 1 = 0"), conn)
    print("pandas empty", len(empty), len(empty.columns))
    distinct = pd.read_sql(sa.text("SELECT DISTINCT sex FROM patients ORDER BY sex"), conn)
    print("pandas distinct", ",".join(distinct["sex"]))
