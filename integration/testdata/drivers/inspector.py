"""Runs every catalog method of SQLAlchemy's inspector (what Superset and
other SQLAlchemy tools read to browse a schema) through the proxy and
prints one line per method: "ok NAME" or "fail NAME MESSAGE".
Usage: python3 inspector.py URL"""
import sys

import sqlalchemy as sa

engine = sa.create_engine(sys.argv[1])
insp = sa.inspect(engine)
calls = [
    ("get_schema_names", lambda: insp.get_schema_names()),
    ("get_table_names", lambda: insp.get_table_names()),
    ("get_view_names", lambda: insp.get_view_names()),
    ("get_columns", lambda: insp.get_columns("visits")),
    ("get_pk_constraint", lambda: insp.get_pk_constraint("patients")),
    ("get_foreign_keys", lambda: insp.get_foreign_keys("visits")),
    ("get_indexes", lambda: insp.get_indexes("visits")),
    ("get_unique_constraints", lambda: insp.get_unique_constraints("visits")),
    ("get_check_constraints", lambda: insp.get_check_constraints("visits")),
    ("get_table_comment", lambda: insp.get_table_comment("visits")),
    ("get_sequence_names", lambda: insp.get_sequence_names()),
    ("has_table", lambda: insp.has_table("visits")),
    ("get_enums", lambda: insp.get_enums()),
]
for name, call in calls:
    try:
        call()
        print("ok " + name)
    except Exception as e:  # noqa: BLE001 - every failure is reported
        print("fail " + name + " " + str(e).splitlines()[0])
