// node-postgres against dpproxy (TestDrivers_NodePostgres): a JavaScript
// Date as the parameter of a DP query (node-postgres sends it as text with
// the process's UTC offset; the test runs with TZ=UTC, so midnight), a
// Date with a time of day answered (read as its date, as PostgreSQL reads
// it for a date parameter), and the connection usable afterwards.
const { Client } = require('pg');

async function main() {
  const client = new Client({ connectionString: process.argv[2] });
  await client.connect();
  await client.query('SET dp.epsilon = 0.05');
  let r = await client.query('SELECT COUNT(*) AS n FROM visits WHERE visit_date >= $1', [new Date(Date.UTC(2023, 0, 1))]);
  console.log('date ' + (Number(r.rows[0].n) > 0));
  r = await client.query('SELECT department, COUNT(*) AS n FROM visits WHERE visit_date BETWEEN $1 AND $2 GROUP BY department',
    [new Date(Date.UTC(2022, 0, 1)), new Date(Date.UTC(2022, 11, 31))]);
  console.log('groups ' + r.rows.length);
  try {
    await client.query('SELECT COUNT(*) AS n FROM visits WHERE visit_date >= $1', [new Date(Date.UTC(2023, 0, 1, 10, 30))]);
    console.log('time of day accepted');
  } catch (e) {
    console.log('time of day refused ' + e.code);
  }
  r = await client.query('SELECT 1 AS after');
  console.log('after ' + r.rows[0].after);
  await client.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
