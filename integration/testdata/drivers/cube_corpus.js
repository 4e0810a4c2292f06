// Chart queries as Cube (cube.dev, from npm) writes and runs them, through
// dpproxy.
//
// Cube turns a dashboard's query object (measures, dimensions, time
// dimensions with a granularity and a date range, filters, order, limit)
// into SQL with its schema compiler (@cubejs-backend/schema-compiler,
// PostgresQuery) and runs it with its PostgreSQL driver
// (@cubejs-backend/postgres-driver: node-postgres, values bound as $1, $2,
// … through the extended protocol, after SET TIME ZONE and SET
// statement_timeout on each pooled connection). Both are Cube's own code,
// run here as a Cube server runs them, minus the HTTP API and the query
// queue.
//
// One part of Cube is not run: its native add-on (@cubejs-backend/native),
// which its installer downloads from GitHub (not reachable from the test
// machines). The schema compiler only needs it for its Jinja engine, which
// renders .jinja and templated .yml data models; the models below are
// JavaScript, so the compiler is given an engine that is never called
// (nativeInstance, an option of prepareCompiler). The 0.35 line's default
// SQL planner is the JavaScript one (later lines default to a native
// planner), so the SQL below is what Cube 0.35 sends.
//
// Usage: node cube_corpus.js DSN
//
// For each query it prints one JSON line: the case's name, the SQL and
// values exactly as Cube hands them to its driver, the column names, the
// rows as text (Cube's driver formats timestamps itself), and the NOTICEs
// the statement drew; a statement that fails prints its SQLSTATE and
// message instead.

const { prepareCompiler } = require('@cubejs-backend/schema-compiler');
const { PostgresQuery } = require('@cubejs-backend/schema-compiler/dist/src/adapter/PostgresQuery');
const { PostgresDriver } = require('@cubejs-backend/postgres-driver');

const dsn = process.argv[2];
// Startup options, as a Cube deployment passes them in its driver's
// connection settings (dbOptions): ε per query, and the bounds the test's
// truths compute.
const options = '-c dp.epsilon=0.5 -c dp.contribution=fixed';

// The data model a Cube user writes for the demo schema as the catalog
// shows it (visits has no visible key column: its visit_id is hidden by
// the policy, so its count measure is COUNT(*), and Cube, which needs a
// primary key on both sides of a join, cannot join visits to patients;
// patients' count is COUNT(patient_id), its primary key).
const model = `
cube('visits', {
  sql_table: 'public.visits',
  measures: {
    count: { type: 'count' },
    patients: { sql: 'patient_id', type: 'count_distinct' },
    total_stay: { sql: 'length_of_stay', type: 'sum' },
    avg_cost: { sql: 'cost', type: 'avg' },
  },
  dimensions: {
    department: { sql: 'department', type: 'string' },
    visit_date: { sql: 'visit_date', type: 'time' },
  },
});

cube('patients', {
  sql_table: 'public.patients',
  measures: {
    count: { type: 'count' },
  },
  dimensions: {
    patient_id: { sql: 'patient_id', type: 'number', primary_key: true },
    sex: { sql: 'sex', type: 'string' },
    region: { sql: 'region', type: 'string' },
  },
});
`;

const cases = [
  ['count by department',
    { measures: ['visits.count'], dimensions: ['visits.department'] }],
  ['monthly visits, date range',
    { measures: ['visits.count'],
      timeDimensions: [{ dimension: 'visits.visit_date', granularity: 'month', dateRange: ['2024-01-01', '2024-06-30'] }],
      order: { 'visits.visit_date': 'asc' } }],
  ['weekly visits in a month',
    { measures: ['visits.count'],
      timeDimensions: [{ dimension: 'visits.visit_date', granularity: 'week', dateRange: ['2024-03-04', '2024-03-31'] }] }],
  ['avg cost by department, notEquals',
    { measures: ['visits.avg_cost'], dimensions: ['visits.department'],
      filters: [{ member: 'visits.department', operator: 'notEquals', values: ['pediatrics'] }] }],
  ['stay by department in 2023',
    { measures: ['visits.total_stay'], dimensions: ['visits.department'],
      timeDimensions: [{ dimension: 'visits.visit_date', dateRange: ['2023-01-01', '2023-12-31'] }] }],
  ['contains filter',
    { measures: ['visits.count'], dimensions: ['visits.department'],
      filters: [{ member: 'visits.department', operator: 'contains', values: ['ology'] }] }],
  ['startsWith filter',
    { measures: ['visits.count'], dimensions: ['visits.department'],
      filters: [{ member: 'visits.department', operator: 'startsWith', values: ['o'] }] }],
  ['top 3 departments',
    { measures: ['visits.count'], dimensions: ['visits.department'], order: { 'visits.count': 'desc' }, limit: 3 }],
  ['patients by department',
    { measures: ['visits.patients'], dimensions: ['visits.department'] }],
  ['total visits',
    { measures: ['visits.count'] }],
  ['patients by region',
    { measures: ['patients.count'], dimensions: ['patients.region'] }],
  ['department values',
    { dimensions: ['visits.department'] }],
];

// normalize does what Cube's API gateway does to a REST query before the
// schema compiler sees it: order as [{id, desc}], limit as rowLimit with
// the gateway's default of 10,000 rows.
function normalize(query) {
  const { order, limit, ...rest } = query;
  return {
    ...rest,
    order: order && Object.entries(order).map(([id, dir]) => ({ id, desc: dir === 'desc' })),
    rowLimit: limit || 10000,
    timezone: 'UTC',
  };
}

function text(v) {
  if (v === null || v === undefined) return null;
  return String(v);
}

async function main() {
  const files = [{ fileName: 'model.js', content: model }];
  const compilers = prepareCompiler(
    { localPath: () => __dirname, dataSchemaFiles: async () => files },
    { adapter: 'postgres', nativeInstance: { newJinjaEngine: () => ({}) } },
  );
  await compilers.compiler.compile();
  const driver = new PostgresDriver({ connectionString: dsn, options, maxPoolSize: 1 });
  const notices = [];
  driver.pool.on('connect', (c) => c.on('notice', (m) => notices.push(m.message)));
  {
    // The catalog read Cube makes when it generates a data model.
    const out = { name: 'tables schema' };
    try {
      const schema = await driver.tablesSchema();
      out.columns = ['column'];
      out.rows = [];
      for (const [table, cols] of Object.entries(schema.public || {})) {
        for (const c of cols) out.rows.push([`${table}.${c.name}`]);
      }
    } catch (e) {
      out.error = e.code || '?';
      out.message = String(e.message).split('\n')[0];
    }
    console.log(JSON.stringify(out));
  }
  for (const [name, query] of cases) {
    const q = new PostgresQuery(compilers, normalize(query));
    const [sql, params] = q.buildSqlAndParams();
    notices.length = 0;
    const out = { name, sql, params };
    try {
      const res = await driver.downloadQueryResults(sql, params, {});
      out.columns = res.types.map((t) => t.name);
      out.rows = res.rows.map((r) => out.columns.map((c) => text(r[c])));
    } catch (e) {
      out.error = e.code || '?';
      out.message = String(e.message).split('\n')[0];
    }
    await new Promise((r) => setTimeout(r, 20));
    out.notices = notices.slice();
    console.log(JSON.stringify(out));
  }
  await driver.release();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
