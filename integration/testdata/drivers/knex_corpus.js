// Chart queries built with the knex and kysely query builders (from npm),
// run through dpproxy with node-postgres: both bind their values as $1, $2,
// ... through the extended protocol (knex binds LIMIT too).
//
// Usage: node knex_corpus.js knex|kysely DSN
//
// For each statement it prints one JSON line: the case's name, the SQL
// and bindings exactly as the builder hands them to the driver
// (knex: .toSQL().toNative(); kysely: .compile()), the column names, the
// rows as text (Dates as ISO text, TZ=UTC), and the NOTICEs the statement
// drew; a statement that fails prints its SQLSTATE and message instead.

const builder = process.argv[2];
const dsn = process.argv[3];
const options = '-c dp.epsilon=0.5 -c dp.contribution=fixed';

function text(v) {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v.toISOString();
  return String(v);
}

async function report(name, compiled, run, notices) {
  notices.length = 0;
  const out = { name, sql: compiled.sql, params: compiled.params };
  try {
    const res = await run();
    out.columns = res.fields.map((f) => f.name);
    out.rows = res.rows.map((r) => out.columns.map((c) => text(r[c])));
  } catch (e) {
    out.error = e.code || '?';
    out.message = String(e.message).split('\n')[0];
  }
  await new Promise((r) => setTimeout(r, 20));
  out.notices = notices.slice();
  console.log(JSON.stringify(out));
}

async function runKnex() {
  const notices = [];
  const knex = require('knex')({
    client: 'pg',
    connection: { connectionString: dsn, options },
    pool: {
      min: 1,
      max: 1,
      afterCreate(conn, done) {
        conn.on('notice', (m) => notices.push(m.message));
        done(null, conn);
      },
    },
  });
  const cases = [
    ['count by department',
      knex('visits').select('department').count('* as n').groupBy('department')],
    ['avg birth_year by region, filtered',
      knex('patients').select('region').avg({ avg_birth_year: 'birth_year' }).where('birth_year', '>=', 1950).groupBy('region')],
    ['sum length_of_stay by department, date range',
      knex('visits').select('department').sum({ total_stay: 'length_of_stay' })
        .where('visit_date', '>=', '2023-01-01').andWhere('visit_date', '<', '2024-01-01').groupBy('department')],
    ['monthly visits, date_trunc',
      knex('visits').select(knex.raw("date_trunc('month', ??) as month", ['visit_date'])).count('* as visits')
        .whereBetween('visit_date', ['2024-01-01', '2024-06-30']).groupBy('month').orderBy('month')],
    ['top 3 departments',
      knex('visits').select('department').count('* as n').groupBy('department').orderBy('n', 'desc').limit(3)],
    ['IN filter, expanding parameters',
      knex('visits').select('department').count('* as n').whereIn('department', ['cardiology', 'oncology', 'neurology']).groupBy('department')],
    ['count(distinct patient_id) by department',
      knex('visits').select('department').countDistinct({ patients: 'patient_id' }).groupBy('department')],
    ['visits by sex, join',
      knex('visits').join('patients', 'visits.patient_id', 'patients.patient_id').select('patients.sex')
        .count({ visits: '*' }).where('visits.age', '>=', 18).groupBy('patients.sex')],
    ['avg cost by department',
      knex('visits').select('department').avg({ avg_cost: 'cost' }).whereNot('department', 'pediatrics').groupBy('department')],
    ['distinct departments',
      knex('visits').distinct('department').orderBy('department')],
    ['row-level select',
      knex('patients').select('birth_year').where('patient_id', 7)],
  ];
  for (const [name, q] of cases) {
    const n = q.toSQL().toNative();
    // knex itself runs it (its pg client: client.query(sql, bindings)).
    await report(name, { sql: n.sql, params: n.bindings }, async () => {
      const rows = await q;
      return { rows, fields: (rows.length ? Object.keys(rows[0]) : []).map((name) => ({ name })) };
    }, notices);
  }
  await knex.destroy();
}

async function runKysely() {
  const { Kysely, PostgresDialect, sql } = require('kysely');
  const { Pool } = require('pg');
  const notices = [];
  const pool = new Pool({ connectionString: dsn, options, max: 1 });
  pool.on('connect', (c) => c.on('notice', (m) => notices.push(m.message)));
  const db = new Kysely({ dialect: new PostgresDialect({ pool }) });
  const month = sql`date_trunc('month', ${sql.ref('visit_date')})`;
  const cases = [
    ['count by department',
      db.selectFrom('visits').select(['department', (eb) => eb.fn.countAll().as('n')]).groupBy('department')],
    ['avg birth_year by region, filtered',
      db.selectFrom('patients').select(['region', (eb) => eb.fn.avg('birth_year').as('avg_birth_year')])
        .where('birth_year', '>=', 1950).groupBy('region')],
    ['monthly visits, date_trunc',
      db.selectFrom('visits').select([month.as('month'), (eb) => eb.fn.countAll().as('visits')])
        .where('visit_date', '>=', '2024-01-01').where('visit_date', '<=', '2024-06-30')
        .groupBy(month).orderBy(month)],
    ['top 3 departments',
      db.selectFrom('visits').select(['department', (eb) => eb.fn.countAll().as('n')]).groupBy('department')
        .orderBy('n', 'desc').limit(3)],
    ['IN filter, expanding parameters',
      db.selectFrom('visits').select(['department', (eb) => eb.fn.countAll().as('n')])
        .where('department', 'in', ['cardiology', 'oncology', 'neurology']).groupBy('department')],
    ['visits by sex, join',
      db.selectFrom('visits').innerJoin('patients', 'patients.patient_id', 'visits.patient_id')
        .select(['patients.sex', (eb) => eb.fn.countAll().as('visits')]).where('visits.age', '>=', 18).groupBy('patients.sex')],
  ];
  for (const [name, q] of cases) {
    const c = q.compile();
    await report(name, { sql: c.sql, params: c.parameters }, async () => {
      const conn = await pool.connect();
      try {
        return await conn.query(c.sql, c.parameters);
      } finally {
        conn.release();
      }
    }, notices);
  }
  await db.destroy();
}

(builder === 'knex' ? runKnex() : runKysely()).catch((e) => {
  console.error(e);
  process.exit(1);
});
