"""Chart queries built with SQLAlchemy (Debian's python3-sqlalchemy, 1.4)
the way an application or Superset builds them, run through dpproxy with a
real dialect: postgresql+psycopg2 (parameters bound client-side, the text
sent in the simple protocol) or postgresql+asyncpg (parameters bound
server-side as $1, $2, ... through the extended protocol).

Usage: sqlalchemy_corpus.py psycopg2|asyncpg URL

For each statement it prints one JSON line: the case's name, the SQL text
and parameters exactly as the dialect handed them to the driver (captured
in before_cursor_execute), the column names, the rows as text (None as
null) and the NOTICEs the statement drew; a statement that fails prints its
SQLSTATE and message instead of rows.
"""

import asyncio
import datetime
import decimal
import json
import logging
import sys

from sqlalchemy import Column, Date, ForeignKey, Integer, Numeric, String, BigInteger
from sqlalchemy import desc, distinct, event, func, select
from sqlalchemy.orm import Session, declarative_base

Base = declarative_base()


class Patient(Base):
    __tablename__ = "patients"
    patient_id = Column(BigInteger, primary_key=True)
    birth_year = Column(Integer)
    sex = Column(String)
    region = Column(String)


class Visit(Base):
    __tablename__ = "visits"
    visit_id = Column(BigInteger, primary_key=True)
    patient_id = Column(BigInteger, ForeignKey("patients.patient_id"))
    visit_date = Column(Date)
    department = Column(String)
    diagnosis = Column(String)
    age = Column(Integer)
    cost = Column(Numeric(10, 2))
    length_of_stay = Column(Integer)


def statements():
    """(name, statement) pairs: the common charts of a dashboard."""
    month = func.date_trunc("month", Visit.visit_date)
    return [
        # A bar chart: rows per department.
        ("count by department",
         select(Visit.department, func.count().label("n")).group_by(Visit.department)),
        # Averages per group with a bound filter.
        ("avg birth_year by region, filtered",
         select(Patient.region, func.avg(Patient.birth_year).label("avg_birth_year"))
         .where(Patient.birth_year >= 1950).group_by(Patient.region)),
        # A sum per group over a bound date range.
        ("sum length_of_stay by department, date range",
         select(Visit.department, func.sum(Visit.length_of_stay).label("total_stay"))
         .where(Visit.visit_date >= datetime.date(2023, 1, 1), Visit.visit_date < datetime.date(2024, 1, 1))
         .group_by(Visit.department)),
        # A time series: func.date_trunc, grouped and ordered by the same
        # expression (its 'month' is a bound parameter of its own).
        ("monthly visits, date_trunc",
         select(month.label("month"), func.count(Visit.patient_id).label("visits"))
         .where(Visit.visit_date.between(datetime.date(2024, 1, 1), datetime.date(2024, 6, 30)))
         .group_by(month).order_by(month)),
        # The same, grouped and ordered by the label (as an app does
        # when the server binds the parameters).
        ("monthly visits, grouped by label",
         select(month.label("month"), func.count().label("visits"))
         .where(Visit.visit_date.between(datetime.date(2024, 1, 1), datetime.date(2024, 6, 30)))
         .group_by("month").order_by("month")),
        # Top N: ORDER BY the aggregate's label, LIMIT as a parameter.
        ("top 3 departments",
         select(Visit.department, func.count().label("n")).group_by(Visit.department)
         .order_by(desc("n")).limit(3)),
        # A multi-select filter: IN with expanding bind parameters.
        ("IN filter, expanding parameters",
         select(Visit.department, func.count().label("n"))
         .where(Visit.department.in_(["cardiology", "oncology", "neurology"]))
         .group_by(Visit.department)),
        # Distinct patients per department.
        ("count(distinct patient_id) by department",
         select(Visit.department, func.count(distinct(Visit.patient_id)).label("patients"))
         .group_by(Visit.department)),
        # A join of visits to patients, grouped by a patient attribute.
        ("visits by sex, join",
         select(Patient.sex, func.count(Visit.patient_id).label("visits"))
         .select_from(Visit).join(Patient, Visit.patient_id == Patient.patient_id)
         .where(Visit.age >= 18).group_by(Patient.sex)),
        # The ORM's Query API, as an application writes it.
        ("ORM query: avg cost by department",
         lambda s: s.query(Visit.department, func.avg(Visit.cost).label("avg_cost"))
         .filter(Visit.department != "pediatrics").group_by(Visit.department)),
        # A query the proxy refuses: rows of one patient.
        ("row-level select",
         select(Patient.birth_year).where(Patient.patient_id == 7)),
    ]


def text(v):
    if v is None:
        return None
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return str(v)


def sqlstate(e):
    o = getattr(e, "orig", e)
    for attr in ("pgcode", "sqlstate"):
        s = getattr(o, attr, None)
        if s:
            return s
    # asyncpg's errors reach SQLAlchemy wrapped; the original is __cause__.
    c = getattr(o, "__cause__", None)
    return getattr(c, "sqlstate", None) or "?"


def capture(engine, sent):
    """Records each statement as the dialect hands it to the driver, and
    the text the driver sends: psycopg2's with the parameters interpolated
    (cursor.mogrify), asyncpg's with SQLAlchemy's $n placeholders (and
    their casts) in place of %s, as the adapter prepares it."""

    @event.listens_for(engine, "before_cursor_execute")
    def _before(conn, cursor, statement, parameters, context, executemany):
        wire = cursor.mogrify(statement, parameters).decode() if hasattr(cursor, "mogrify") else None
        sent.append({"sql": statement, "params": parameters, "wire": wire})

    if engine.dialect.driver == "asyncpg":
        from sqlalchemy.dialects.postgresql import asyncpg as sa_asyncpg

        cls = sa_asyncpg.AsyncAdapt_asyncpg_connection
        prepare = cls._prepare

        async def _prepare(self, operation, *args, **kw):
            if sent:
                sent[-1]["wire"] = operation
            return await prepare(self, operation, *args, **kw)

        cls._prepare = _prepare


def run_sync(url):
    from sqlalchemy import create_engine

    # dp settings as startup options (a ROLLBACK after a refusal would undo
    # a SET made inside SQLAlchemy's transaction).
    engine = create_engine(url, connect_args={"options": "-c dp.epsilon=0.5 -c dp.contribution=fixed"})
    sent = []
    capture(engine, sent)
    # The psycopg2 dialect moves each NOTICE from the connection to the
    # logger sqlalchemy.dialects.postgresql at INFO (as its docs say).
    notices = []

    class Keep(logging.Handler):
        def emit(self, record):
            notices.append(record.getMessage())

    log = logging.getLogger("sqlalchemy.dialects.postgresql")
    log.setLevel(logging.INFO)
    log.addHandler(Keep())
    with Session(engine) as s:
        for name, stmt in statements():
            del sent[:]
            del notices[:]
            out = {"name": name}
            try:
                if callable(stmt):
                    q = stmt(s)
                    rows, cols = q.all(), [d["name"] for d in q.column_descriptions]
                else:
                    r = s.execute(stmt)
                    rows, cols = r.all(), list(r.keys())
                out["columns"] = cols
                out["rows"] = [[text(v) for v in r] for r in rows]
            except Exception as e:  # noqa: BLE001
                s.rollback()
                out["error"] = sqlstate(e)
                out["message"] = str(getattr(e, "orig", e)).splitlines()[0]
            out.update(sent[-1] if sent else {})
            out["notices"] = [n.strip() for n in notices]
            print(json.dumps(out, default=text))


async def run_async(url):
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    engine = create_async_engine(url, connect_args={"server_settings": {"dp.epsilon": "0.5", "dp.contribution": "fixed"}})
    sent = []
    capture(engine.sync_engine, sent)
    notices = []
    async with AsyncSession(engine) as s:
        conn = await s.connection()
        raw = (await conn.get_raw_connection()).dbapi_connection.driver_connection
        raw.add_log_listener(lambda c, m: notices.append(m.message))
        for name, stmt in statements():
            del sent[:]
            del notices[:]
            out = {"name": name}
            try:
                if callable(stmt):
                    def orm(ss):
                        q = stmt(ss)
                        return q.all(), [d["name"] for d in q.column_descriptions]
                    rows, cols = await s.run_sync(orm)
                else:
                    r = await s.execute(stmt)
                    rows, cols = r.all(), list(r.keys())
                out["columns"] = cols
                out["rows"] = [[text(v) for v in r] for r in rows]
            except Exception as e:  # noqa: BLE001
                await s.rollback()
                out["error"] = sqlstate(e)
                out["message"] = str(getattr(e, "orig", e)).splitlines()[0]
            out.update(sent[-1] if sent else {})
            await asyncio.sleep(0.05)  # NOTICEs arrive as log messages
            out["notices"] = list(notices)
            print(json.dumps(out, default=text))
    await engine.dispose()


def main():
    dialect, url = sys.argv[1], sys.argv[2]
    if dialect == "psycopg2":
        run_sync(url)
    elif dialect == "asyncpg":
        asyncio.run(run_async(url))
    else:
        sys.exit("unknown dialect " + dialect)


if __name__ == "__main__":
    main()
