package pgsql

import "strings"

// The allow-lists of catalog statements (catalog.go explains why they are
// allow-lists). A name is allowed with all its overloads: each was checked
// against PostgreSQL 15's pg_proc to run no SQL text, change no state
// beyond the statement, and show nothing of other sessions. To add one,
// check every overload the same way, and add a client's statement that
// needs it to testdata/catalog_clients.sql.

// catalogFunctions may be called by catalog statements, unqualified or
// qualified with pg_catalog.
var catalogFunctions = setOf(
	// Catalog look-ups and object descriptions: what psql's backslash
	// commands, pgjdbc's DatabaseMetaData, SQLAlchemy's inspector and BI
	// tools' schema browsers read.
	"format_type", "pg_get_expr", "pg_get_userbyid", "pg_get_indexdef", "pg_get_constraintdef",
	"pg_get_viewdef", "pg_get_ruledef", "pg_get_triggerdef", "pg_get_functiondef",
	"pg_get_function_arguments", "pg_get_function_identity_arguments", "pg_get_function_result",
	"pg_get_function_arg_default", "pg_get_function_sqlbody", "pg_get_serial_sequence",
	"pg_get_partkeydef", "pg_get_partition_constraintdef", "pg_get_statisticsobjdef",
	"pg_get_statisticsobjdef_columns", "pg_get_statisticsobjdef_expressions",
	"pg_get_publication_tables", "pg_get_replica_identity_index", "pg_get_keywords",
	"pg_get_catalog_foreign_keys", "pg_relation_is_publishable", "pg_options_to_table",
	"pg_partition_tree", "pg_partition_root", "pg_partition_ancestors",
	"pg_index_column_has_property", "pg_index_has_property", "pg_indexam_has_property",
	"pg_tablespace_location", "pg_describe_object", "pg_identify_object",
	"pg_identify_object_as_address", "pg_sequence_parameters", "pg_typeof", "pg_collation_for",
	"pg_table_is_visible", "pg_type_is_visible", "pg_function_is_visible", "pg_operator_is_visible",
	"pg_opclass_is_visible", "pg_opfamily_is_visible", "pg_conversion_is_visible",
	"pg_collation_is_visible", "pg_statistics_obj_is_visible", "pg_ts_config_is_visible",
	"pg_ts_dict_is_visible", "pg_ts_parser_is_visible", "pg_ts_template_is_visible",
	"obj_description", "col_description", "shobj_description",
	"pg_encoding_to_char", "pg_char_to_encoding", "getdatabaseencoding", "pg_encoding_max_length", "pg_client_encoding",
	"to_regclass", "to_regtype", "to_regproc", "to_regprocedure", "to_regoper", "to_regoperator",
	"to_regnamespace", "to_regrole", "to_regcollation",
	"aclexplode", "acldefault", "aclcontains", "makeaclitem",
	"ts_token_type",
	// The session: the shadow connection's own settings and names.
	"current_schema", "current_schemas", "current_database", "current_user", "session_user",
	"current_role", "current_catalog", "current_setting", "version", "pg_is_in_recovery",
	"pg_my_temp_schema", "pg_is_other_temp_schema", "row_security_active", "pg_jit_available",
	// Privileges.
	"has_any_column_privilege", "has_column_privilege", "has_database_privilege",
	"has_foreign_data_wrapper_privilege", "has_function_privilege", "has_language_privilege",
	"has_parameter_privilege", "has_schema_privilege", "has_sequence_privilege",
	"has_server_privilege", "has_table_privilege", "has_tablespace_privilege",
	"has_type_privilege", "pg_has_role",
	// Sizes: of the shadow's relations and databases, which hold no
	// protected rows (the shadow is a cluster of its own, SECURITY.md).
	"pg_relation_size", "pg_table_size", "pg_indexes_size", "pg_total_relation_size",
	"pg_database_size", "pg_tablespace_size", "pg_column_size", "pg_size_pretty", "pg_size_bytes",
	// Casts written as calls, and type names with modifiers outside a
	// cast (numeric(10,2) '1.5').
	"int2", "int4", "int8", "int", "integer", "smallint", "bigint", "float4", "float8", "float",
	"real", "numeric", "decimal", "dec", "text", "varchar", "char", "character", "bpchar",
	"nchar", "varying", "name", "bool", "boolean", "date", "time", "timetz", "timestamp",
	"timestamptz", "interval", "oid", "regclass", "regtype", "regproc", "regprocedure",
	"regnamespace", "regrole", "regoper", "regoperator", "regcollation", "regconfig",
	"bit", "varbit", "bytea", "json", "jsonb", "uuid", "inet", "cidr", "macaddr", "money", "xid",
	"cube", "rollup",
	// Strings.
	"length", "char_length", "character_length", "octet_length", "bit_length", "lower", "upper",
	"initcap", "substr", "left", "right", "lpad", "rpad", "ltrim", "rtrim", "btrim", "replace",
	"translate", "repeat", "reverse", "strpos", "split_part", "starts_with", "concat", "concat_ws",
	"format", "quote_ident", "quote_literal", "quote_nullable", "chr", "ascii", "to_hex", "md5",
	"sha224", "sha256", "sha384", "sha512", "encode", "decode", "convert_from", "convert_to",
	"regexp_replace", "regexp_match", "regexp_matches", "regexp_split_to_array",
	"regexp_split_to_table", "regexp_like", "regexp_count", "regexp_instr", "regexp_substr",
	"string_to_array", "string_to_table", "to_char", "to_number", "unistr", "like", "notlike",
	"textlike", "textnlike", "texticlike", "texticnlike", "textregexeq", "texticregexeq",
	"to_tsvector", "to_tsquery", "plainto_tsquery", "phraseto_tsquery", "websearch_to_tsquery",
	// Numbers.
	"abs", "ceil", "ceiling", "floor", "round", "trunc", "sign", "mod", "div", "power", "pow",
	"sqrt", "cbrt", "exp", "ln", "log", "log10", "pi", "degrees", "radians", "sin", "cos", "tan",
	"asin", "acos", "atan", "atan2", "sind", "cosd", "tand", "cot", "cotd", "sinh", "cosh", "tanh",
	"width_bucket", "scale", "min_scale", "trim_scale", "gcd", "lcm", "factorial",
	"num_nulls", "num_nonnulls",
	// Dates and times.
	"now", "clock_timestamp", "statement_timestamp", "transaction_timestamp", "timeofday",
	"date_trunc", "date_part", "date_bin", "age", "make_date", "make_time", "make_timestamp",
	"make_timestamptz", "make_interval", "justify_days", "justify_hours", "justify_interval",
	"isfinite", "to_date", "to_timestamp", "timezone", "localtime", "localtimestamp",
	"current_time", "current_timestamp",
	// Arrays, JSON and set-returning helpers. generate_series is allowed:
	// pgjdbc's getImportedKeys calls it with a bound read from the catalog,
	// and its cost, like that of a join of catalogs, is bounded by the
	// catalog route's statement_timeout rather than by its arguments.
	"array_agg", "array_length", "array_lower", "array_upper", "array_ndims", "array_dims",
	"array_position", "array_positions", "array_remove", "array_replace", "array_append",
	"array_prepend", "array_cat", "array_to_string", "array_fill", "cardinality", "unnest",
	"generate_subscripts", "generate_series", "array_to_json", "row_to_json", "to_json",
	"to_jsonb", "json_build_object", "json_build_array", "jsonb_build_object",
	"jsonb_build_array", "json_object", "jsonb_object", "json_agg", "jsonb_agg",
	"json_object_agg", "jsonb_object_agg", "json_array_elements", "json_array_elements_text",
	"jsonb_array_elements", "jsonb_array_elements_text", "json_each", "json_each_text",
	"jsonb_each", "jsonb_each_text", "json_extract_path", "json_extract_path_text",
	"jsonb_extract_path", "jsonb_extract_path_text", "json_typeof", "jsonb_typeof",
	"json_array_length", "jsonb_array_length", "json_object_keys", "jsonb_object_keys",
	"jsonb_pretty", "json_strip_nulls", "jsonb_strip_nulls",
	// Aggregates.
	"count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every", "bit_and", "bit_or",
	"bit_xor", "string_agg", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop",
	"var_samp", "corr", "covar_pop", "covar_samp", "regr_avgx", "regr_avgy", "regr_count",
	"regr_intercept", "regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_syy",
	"percentile_cont", "percentile_disc", "mode",
	// Window functions.
	"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
	"first_value", "last_value", "nth_value",
	// Table samples (TABLESAMPLE bernoulli(10)).
	"bernoulli", "system",
)

// informationSchemaFunctions may be called qualified with
// information_schema: the helpers its views and pgjdbc use.
var informationSchemaFunctions = setOf(
	"_pg_expandarray", "_pg_char_max_length", "_pg_char_octet_length", "_pg_datetime_precision",
	"_pg_index_position", "_pg_interval_type", "_pg_numeric_precision",
	"_pg_numeric_precision_radix", "_pg_numeric_scale", "_pg_truetypid", "_pg_truetypmod",
)

// syntaxBeforeParen are keywords that PostgreSQL's grammar reads, unquoted
// and unqualified, before "(" as syntax, never as a call: clauses and
// operators (FROM (, IN (, AND (), constructs that look like calls but are
// expressions of the grammar (CAST, COALESCE, EXISTS, EXTRACT, ROW…), and
// unreserved keywords of constructs (OVER, FILTER, SETS, FIRST, ZONE…) that
// no function of PostgreSQL is named after. The XML and JSON constructs
// (xmlelement, xmlexists, json_object…) are not here: written so, they
// are checked as calls, and xml ones refused.
var syntaxBeforeParen = setOf(
	"select", "explain", "from", "where", "and", "or", "not", "in", "exists", "any", "all", "some", "array",
	"values", "as", "on", "using", "join", "lateral", "union", "intersect", "except", "when",
	"then", "else", "case", "distinct", "limit", "offset", "having", "by", "with", "only",
	"materialized", "between", "symmetric", "asymmetric", "is", "like", "ilike", "similar", "to",
	"escape", "for", "placing", "leading", "trailing", "both", "variadic", "operator",
	"repeatable", "first", "next", "zone", "over", "filter", "group", "sets", "grouping",
	"cast", "coalesce", "nullif", "greatest", "least", "extract", "position", "substring", "trim",
	"overlay", "normalize", "row", "default", "returning", "window", "partition", "range", "rows",
	"groups", "preceding", "following", "unbounded", "current", "exclude", "overlaps",
)

// catalogRelations are the system relations (names starting with pg_)
// that catalog statements may read: the system catalogs and the views over
// them, and the views of the connection's own state (pg_settings,
// pg_cursors, pg_prepared_statements). Left out: every view of other
// sessions or of the server's activity and statistics (pg_stat_*,
// pg_statio_*, pg_locks, pg_prepared_xacts, pg_backend_memory_contexts,
// pg_shmem_allocations, pg_replication_*, extensions' pg_stat_statements),
// the planner's statistics of columns (pg_statistic, pg_statistic_ext_data,
// pg_stats, pg_stats_ext, pg_stats_ext_exprs), the contents of large
// objects (pg_largeobject; their list, pg_largeobject_metadata, which
// psql's \lo_list reads, is allowed: no catalog statement can create
// one), the server's files
// (pg_config, pg_file_settings, pg_hba_file_rules,
// pg_ident_file_mappings) and password hashes (pg_authid, pg_shadow).
var catalogRelations = setOf(
	"pg_catalog", "pg_toast", "pg_temp",
	"pg_aggregate", "pg_am", "pg_amop", "pg_amproc", "pg_attrdef", "pg_attribute",
	"pg_auth_members", "pg_cast", "pg_class", "pg_collation", "pg_constraint", "pg_conversion",
	"pg_database", "pg_db_role_setting", "pg_default_acl", "pg_depend", "pg_description",
	"pg_enum", "pg_event_trigger", "pg_extension", "pg_foreign_data_wrapper",
	"pg_foreign_server", "pg_foreign_table", "pg_index", "pg_inherits", "pg_init_privs",
	"pg_language", "pg_largeobject_metadata", "pg_namespace", "pg_opclass", "pg_operator", "pg_opfamily",
	"pg_parameter_acl", "pg_partitioned_table", "pg_policy", "pg_proc", "pg_publication",
	"pg_publication_namespace", "pg_publication_rel", "pg_range", "pg_rewrite", "pg_seclabel",
	"pg_sequence", "pg_shdepend", "pg_shdescription", "pg_shseclabel", "pg_statistic_ext",
	"pg_subscription", "pg_subscription_rel", "pg_tablespace", "pg_transform", "pg_trigger",
	"pg_ts_config", "pg_ts_config_map", "pg_ts_dict", "pg_ts_parser", "pg_ts_template", "pg_type",
	"pg_user_mapping",
	"pg_available_extension_versions", "pg_available_extensions", "pg_cursors", "pg_group",
	"pg_indexes", "pg_matviews", "pg_policies", "pg_prepared_statements", "pg_publication_tables",
	"pg_roles", "pg_rules", "pg_seclabels", "pg_sequences", "pg_settings", "pg_tables",
	"pg_timezone_abbrevs", "pg_timezone_names", "pg_user", "pg_user_mappings", "pg_views",
)

// attributeFunctions are the functions that alias.f must not name
// (catalog.go, checkAttribute): those PostgreSQL 15 (with citext and
// plpgsql) could call with one argument, that are not immutable and not in
// catalogFunctions, and whose names do not start with pg_ (refused as
// relations). Generated with
//
//	SELECT DISTINCT proname FROM pg_proc
//	WHERE pronargs >= 1 AND (pronargs - pronargdefaults <= 1 OR provariadic <> 0)
//	  AND provolatile <> 'i' AND proname NOT IN (catalogFunctions) AND proname NOT LIKE 'pg\_%'
var attributeFunctions = setOf(
	"aclitemin", "aclitemout", "amvalidate", "anyarray_out", "anyarray_recv", "anyarray_send",
	"anycompatiblearray_out", "anycompatiblearray_recv", "anycompatiblearray_send",
	"anycompatiblemultirange_out", "anycompatiblerange_out", "anyenum_out", "anymultirange_out",
	"anyrange_out", "array_out", "array_send", "array_typanalyze",
	"binary_upgrade_set_next_array_pg_type_oid", "binary_upgrade_set_next_attribute_versions",
	"binary_upgrade_set_next_heap_pg_class_oid", "binary_upgrade_set_next_heap_relfilenode",
	"binary_upgrade_set_next_index_pg_class_oid", "binary_upgrade_set_next_index_relfilenode",
	"binary_upgrade_set_next_multirange_array_pg_type_oid",
	"binary_upgrade_set_next_multirange_pg_type_oid", "binary_upgrade_set_next_pg_authid_oid",
	"binary_upgrade_set_next_pg_enum_oid", "binary_upgrade_set_next_pg_tablespace_oid",
	"binary_upgrade_set_next_pg_type_oid", "binary_upgrade_set_next_toast_pg_class_oid",
	"binary_upgrade_set_next_toast_relfilenode", "binary_upgrade_set_record_init_privs",
	"bpcharsend", "brin_bloom_summary_recv", "brin_bloom_summary_send",
	"brin_minmax_multi_summary_recv", "brin_minmax_multi_summary_send", "brin_summarize_new_values",
	"brinhandler", "bthandler", "cash_in", "cash_out", "citextrecv", "citextsend", "cstring_recv",
	"cstring_send", "currval", "date_in", "date_out", "dsnowball_init", "enum_first", "enum_last",
	"enum_out", "enum_range", "enum_send", "fmgr_c_validator", "fmgr_internal_validator",
	"fmgr_sql_validator", "gin_clean_pending_list", "ginhandler", "gisthandler", "hashhandler",
	"heap_tableam_handler", "interval_out", "json_to_record", "json_to_recordset",
	"jsonb_agg_finalfn", "jsonb_object_agg_finalfn", "jsonb_to_record", "jsonb_to_recordset",
	"lo_close", "lo_creat", "lo_create", "lo_get", "lo_import", "lo_tell", "lo_tell64", "lo_unlink",
	"multirange_out", "multirange_send", "multirange_typanalyze", "mxid_age", "namerecv",
	"namesend", "nextval", "oidvectortypes", "plpgsql_inline_handler", "plpgsql_validator",
	"range_out", "range_send", "range_typanalyze", "record_out", "record_send", "regclassin",
	"regclassout", "regcollationin", "regcollationout", "regconfigin", "regconfigout",
	"regdictionaryin", "regdictionaryout", "regnamespacein", "regnamespaceout", "regoperatorin",
	"regoperatorout", "regoperin", "regoperout", "regprocedurein", "regprocedureout", "regprocin",
	"regprocout", "regrolein", "regroleout", "regtypein", "regtypeout", "setseed", "spghandler",
	"textrecv", "textsend", "timestamp_out", "timestamptz_out", "ts_debug", "ts_stat",
	"ts_typanalyze", "txid_status", "varcharsend", "xml", "xml_in", "xml_is_well_formed",
	"xml_recv", "xml_send",
)

// selectableFields are the fields catalog statements may select from a
// parenthesized value ((information_schema._pg_expandarray(i.indkey)).n, as
// pgjdbc does): x and n, the fields of _pg_expandarray's rows.
var selectableFields = setOf("x", "n")

const selectableFieldList = "x and n"

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		if n != strings.ToLower(n) {
			panic("pgsql: allow-list name not in lower case: " + n)
		}
		m[n] = true
	}
	return m
}
