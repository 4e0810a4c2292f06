# pandas over SQLAlchemy (psycopg2) against dpproxy with the error columns
# asked for as a startup option, as a BI tool or notebook passes it
# (TestDrivers_PandasErrorColumns): the margin of error of each released
# column arrives as a column of the DataFrame, and SHOW dp.last_answer
# reads as a DataFrame too. Prints one line per step.
import sys

import pandas as pd
import sqlalchemy

engine = sqlalchemy.create_engine(sys.argv[1], connect_args={"options": "-c dp.error_columns=on -c dp.epsilon=0.5"})
df = pd.read_sql("SELECT department, COUNT(*) AS n, AVG(cost) AS mean_cost FROM visits GROUP BY department", engine)
print("columns", ",".join(df.columns))
print("rows", len(df))
moe = pd.to_numeric(df["n_moe95"])
print("n_moe95 positive", bool((moe > 0).all()), "one value", moe.nunique() == 1)
mean_moe = pd.to_numeric(df["mean_cost_moe95"])
print("mean_cost_moe95 positive", bool((mean_moe > 0).all()), "per group", mean_moe.nunique() > 1)
last = pd.read_sql("SHOW dp.last_answer", engine)
items = dict(zip(last["item"], last["value"]))
print("last epsilon", items.get("epsilon"), "cached", items.get("cached"))
iv = items.get("intervals_95", "")
print("last intervals has n", "(n," in iv, "balanced", iv.count("(") == iv.count(")"), "per group", "per group:" in iv)
print("last cost", items.get("cost_epsilon"))
