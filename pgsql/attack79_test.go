package pgsql

import (
	"strings"
	"testing"
)

// Attack round 79: three more ways to name a FROM function's scalar result
// that checkCallColumn (round 78's fix) does not see, each making
// PostgreSQL 15 call ts_stat(text) on it, which runs its argument as SQL
// on the shared shadow connection (any function, any relation: every
// allow-list bypassed). Each was run against a real PostgreSQL 15.x as a
// role with default_transaction_read_only=on, like the shadow role; the
// inner SQL set statement_timeout on the connection with set_config and
// the next statement on it saw the new value (evidence in each test).

// TestAttack79_AliasWithColumnListNamedAfterFunction: checkCallColumn
// lets alias.f through when f == alias, on the premise that a scalar
// function's only column is named after its alias. With a column list
// (AS ts_stat(c)) the column is c, the alias's value is still the scalar,
// and ts_stat.ts_stat is ts_stat(value). PostgreSQL 15:
//
//	=> SELECT ts_stat.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(
//	   set_config(''statement_timeout'', ''7'', false))']) AS ts_stat(c);
//	  ts_stat
//	-----------
//	 (7ms,1,1)
//	=> SHOW statement_timeout;
//	 7ms
func TestAttack79_AliasWithColumnListNamedAfterFunction(t *testing.T) {
	for _, sql := range []string{
		"SELECT ts_stat.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(set_config(''statement_timeout'', ''7'', false))']) AS ts_stat(c)",
		"SELECT ts_stat.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(relname) FROM pg_class']) ts_stat(c)",
		"SELECT ts_stat.ts_stat FROM ROWS FROM (unnest(ARRAY['SELECT 1'])) AS ts_stat(c)",
	} {
		if err := checkCatalog(t, sql); err == nil {
			t.Errorf("accepted, but the alias's column is c, so PostgreSQL calls ts_stat(alias) on the scalar:\n%s", sql)
		}
	}
}

// TestAttack79_KeywordAliasOfFunction: callAliases skips an alias that is
// a PostgreSQL keyword (postgresKeywords), but unreserved and col_name
// keywords are valid aliases (ColId), with or without AS: action, name,
// value, key… PostgreSQL 15:
//
//	=> SELECT action.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(
//	   set_config(''statement_timeout'', ''8'', false))']) AS action;
//	  ts_stat
//	-----------
//	 (8ms,1,1)
//	=> SHOW statement_timeout;
//	 8ms
//
// (the same with AS name: 9ms).
func TestAttack79_KeywordAliasOfFunction(t *testing.T) {
	for _, sql := range []string{
		"SELECT action.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(set_config(''statement_timeout'', ''8'', false))']) AS action",
		"SELECT action.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(relname) FROM pg_class']) action",
		"SELECT name.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(relname) FROM pg_class']) AS name",
		"SELECT value.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(relname) FROM pg_class']) value",
	} {
		if err := checkCatalog(t, sql); err == nil {
			t.Errorf("accepted, but a keyword that is a ColId is the function's alias, and PostgreSQL calls ts_stat(alias):\n%s", sql)
		}
	}
}

// TestAttack79_TruncatedAliasOfFunction: PostgreSQL truncates identifiers
// to 63 bytes (NAMEDATALEN-1); the lexer keeps them whole. An alias of 70
// bytes and a reference by its first 63 are one name to PostgreSQL and
// two to callAliases. PostgreSQL 15 (a×63, a×70):
//
//	=> SELECT aaa…a.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(
//	   set_config(''statement_timeout'', ''10'', false))']) AS aaa…aaaaaaa;
//	NOTICE:  identifier "aaa…aaaaaaa" will be truncated to "aaa…a"
//	  ts_stat
//	------------
//	 (10ms,1,1)
//	=> SHOW statement_timeout;
//	 10ms
func TestAttack79_TruncatedAliasOfFunction(t *testing.T) {
	a63, a70 := strings.Repeat("a", 63), strings.Repeat("a", 70)
	for _, sql := range []string{
		"SELECT " + a63 + ".ts_stat FROM unnest(ARRAY['SELECT to_tsvector(set_config(''statement_timeout'', ''10'', false))']) AS " + a70,
		"SELECT " + a63 + "x.ts_stat FROM unnest(ARRAY['SELECT to_tsvector(relname) FROM pg_class']) " + a63 + "y",
	} {
		if err := checkCatalog(t, sql); err == nil {
			t.Errorf("accepted, but PostgreSQL truncates both names to the same 63 bytes and calls ts_stat(alias):\n%s", sql)
		}
	}
}

// TestAttack79_KeywordFunctionInFromWithoutParens: low severity. FROM
// accepts PostgreSQL's SQL-standard functions written without
// parentheses (CURRENT_USER, SESSION_USER, CURRENT_SCHEMA,
// CURRENT_CATALOG… and COLLATION FOR (…), whose "for (" callAliases
// skips): each is a function RTE with a scalar value, but callAliases
// sees no call, so alias.f passes for any f. PostgreSQL 15 then calls
// f(value); the value is the server's (role, schema, database, collation
// name), not the analyst's, so ts_stat runs only that name as SQL, but a
// function outside the allow-list runs all the same:
//
//	=> SELECT t.ts_stat FROM current_user t;
//	ERROR:  syntax error at or near "shadow"
//	QUERY:  shadow
//	=> SELECT t.ts_stat FROM current_schema t;
//	ERROR:  syntax error at or near "public"
//	QUERY:  public
func TestAttack79_KeywordFunctionInFromWithoutParens(t *testing.T) {
	for _, sql := range []string{
		"SELECT t.ts_stat FROM current_user t",
		"SELECT t.ts_stat FROM current_schema t",
		"SELECT t.ts_stat FROM session_user AS t",
		"SELECT t.ts_stat FROM current_catalog t",
		"SELECT t.ts_stat FROM COLLATION FOR ('x'::text) t", // QUERY:  "default"
	} {
		if err := checkCatalog(t, sql); err == nil {
			t.Errorf("accepted, but PostgreSQL calls ts_stat on the FROM function's scalar value:\n%s", sql)
		}
	}
}

// TestAttack79_AttributeNames: after rounds 78 and 79, alias.f is checked by
// f alone, whatever alias names: the statements PostgreSQL runs where a
// table alias is reused as an output alias (round 79's false refusals of
// the first fix), columns named like immutable functions (width, host),
// and allowed functions pass; the functions that do harm called on a
// value are in attributeFunctions, and no allowed function is.
func TestAttack79_AttributeNames(t *testing.T) {
	for _, sql := range []string{
		"SELECT c.relkind, count(*) AS c FROM pg_class c GROUP BY c.relkind",
		"SELECT d.datname, age(d.datfrozenxid) AS d FROM pg_database d",
		"SELECT b.width, b.height, b.host FROM (SELECT 1 AS width, 2 AS height, 3 AS host) b",
		"SELECT a.abbrev, a.utc_offset FROM pg_timezone_abbrevs a",
		"SELECT t.upper FROM unnest(ARRAY['a']) t",
	} {
		if err := checkCatalog(t, sql); err != nil {
			t.Errorf("refused: %v\n%s", err, sql)
		}
	}
	for _, f := range []string{"ts_stat", "ts_debug", "setseed", "txid_status", "nextval", "currval", "lo_import", "lo_create", "lo_unlink", "brin_summarize_new_values", "gin_clean_pending_list"} {
		if !attributeFunctions[f] {
			t.Errorf("%s is not in attributeFunctions", f)
		}
	}
	for f := range catalogFunctions {
		if attributeFunctions[f] {
			t.Errorf("allowed function %s is in attributeFunctions", f)
		}
	}
	long := strings.Repeat("a", 63)
	if err := checkCatalog(t, "SELECT "+long+".ts_stat"+strings.Repeat("x", 70)+" FROM pg_class "+long); err != nil {
		t.Errorf("a long column name that is no function after truncation was refused: %v", err)
	}
}
