# pandas over SQLAlchemy (psycopg2) against dpproxy (TestRound111_PandasRoundOverAggregate):
# ROUND, sqrt, floor and ::int over DP aggregates, as a new analyst writes them,
# are answered (post-processing of the released values: one charge each),
# and ROUND of a raw column is still refused. Prints one line per step.
import sys

import pandas as pd
import sqlalchemy

engine = sqlalchemy.create_engine(sys.argv[1], connect_args={"options": "-c dp.epsilon=0.5"})
r = pd.read_sql("SELECT department, ROUND(AVG(cost), 2) AS avg_cost FROM visits GROUP BY department ORDER BY department", engine)
print("columns", ",".join(r.columns))
print("rows", len(r))
print("two decimals", bool(((r["avg_cost"] * 100).round(6) % 1 == 0).all()))
print("in range", bool(r["avg_cost"].between(0, 20000).all()))
s = pd.read_sql("SELECT sqrt(VAR_POP(age)) AS sd, floor(COUNT(*) / 1000) AS k FROM visits", engine)
print("sqrt floor", ",".join(s.columns), len(s))
i = pd.read_sql("SELECT department, AVG(cost)::int AS a FROM visits GROUP BY department", engine)
print("int cast", str(i["a"].dtype), len(i))
try:
    pd.read_sql("SELECT ROUND(age) FROM visits", engine)
    print("raw rounded answered")
except Exception as e:
    print("raw rounded refused", getattr(getattr(e, "orig", e), "pgcode", None))
