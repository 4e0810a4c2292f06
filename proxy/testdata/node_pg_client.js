// A node-postgres (pg) session against dpproxy, driven by TestNodePostgres:
// a parameterised DP aggregate (extended protocol, parameter type left to
// the server), a grouped DP query, a refused query as an ordinary error,
// and the connection still usable afterwards.
const { Client } = require('pg');

async function main() {
  const client = new Client({ connectionString: process.argv[2] });
  await client.connect();
  let r = await client.query('SELECT COUNT(*) AS n FROM visits WHERE age > $1', [30]);
  console.log('count ' + r.rows[0].n);
  r = await client.query({ text: 'SELECT department, COUNT(*) AS n FROM visits WHERE age >= $1 GROUP BY department', values: [18] });
  console.log('groups ' + r.rows.length + ' ' + r.fields.map((f) => f.name).join(','));
  try {
    await client.query('SELECT * FROM visits');
    console.log('not refused');
  } catch (e) {
    console.log('refused ' + e.code);
  }
  r = await client.query('SELECT $1::int + 1 AS after', [41]);
  console.log('after ' + r.rows[0].after);
  await client.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
