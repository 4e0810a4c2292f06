-- Catalog statements real clients sent, recorded on 28 Nov 2026 to check
-- that pgsql.CheckCatalog accepts every one (TestCheckCatalog_Clients):
--   - through the proxy to the shadow catalog, by the proxy's and the
--     integration tests' sessions of psql 15, pgjdbc (Debian's),
--     SQLAlchemy 1.4 over psycopg2, psycopg 3, asyncpg, node-postgres and
--     pgx, and the outer SQL the proxy runs there for post-processed DP
--     answers;
--   - on a PostgreSQL 15 with log_statement = all (schema with a foreign
--     key, a view, a sequence, an enum, a domain, a function, a
--     materialized view): psql 15's backslash commands (\d, \d+, \dt+,
--     \df+, \dT+, \dn+, \du, \dp, \dx+, \dF*, \dA*, \db+, \des, \dP+,
--     \dX, \dconfig, \l+, \do+, \sf, \sv, \lo_list… and \d of each
--     object), every catalog method of pgjdbc's DatabaseMetaData
--     (integration/testdata/drivers/MetaData.java: what sqlline's metadata
--     commands call), SQLAlchemy 1.4's inspector (schemas, tables, views
--     and their definitions, columns, keys, indexes, constraints,
--     comments, sequences, enums), and knex's and kysely's introspection.
-- Statements are separated by a line "-- ----".
-- ----
SELECT 1 AS one
-- ----
 SELECT 1
-- ----
SELECT COUNT(*) AS n FROM patients WHERE birth_year > $1
-- ----
SELECT g, 'v' || g AS s FROM generate_series(1, 5) g
-- ----
SELECT 1
-- ----
SELECT * FROM (VALUES
		(1, E'a\tb', NULL::text, E'back\\slash', '"quoted", comma'),
		(2, E'line\nbreak\r', '', '\.', E'\x01\b\f\v'),
		(3, 'plain', 'NA', 'semi;colon', 'x|y')) AS t(id, "a b", "c""d", e, f)
-- ----
SELECT '\.' AS only
-- ----
SELECT repeat('x', 300000) AS big, g FROM generate_series(1, 3) g
-- ----
SELECT repeat('y', $1::int) AS big
-- ----
SELECT g, 'row ' || g FROM generate_series(1, 20000) g
-- ----
SELECT g FROM generate_series(1, $1::int) g
-- ----
SELECT current_setting('TimeZone')
-- ----
SELECT $1::int + 1
-- ----
 select pg_catalog.version()
-- ----
 SELECT relname FROM pg_class WHERE relname IN ('visits', 'patients') ORDER BY 1
-- ----
 SELECT current_setting('TimeZone'), current_schema()
-- ----
 SELECT current_setting('TimeZone')
-- ----
SELECT 1::int4 + $1
-- ----
select current_schema()
-- ----
SELECT COUNT(*) FROM visits WHERE age > $1
-- ----
SELECT department, COUNT(*), AVG(cost) FROM visits WHERE department <> $1 GROUP BY department
-- ----
SELECT department, COUNT(*) FROM visits WHERE age >= $1 GROUP BY department
-- ----
SELECT current_setting('TimeZone') || '|' || current_setting('extra_float_digits') || '|' || current_setting('application_name')
-- ----
 SELECT current_setting('TimeZone') || '|' || current_setting('extra_float_digits') || '|' || current_setting('application_name')
-- ----
SELECT current_setting('TimeZone') WHERE $1::int > 0
-- ----
SELECT count(*) FROM other.blocker
-- ----
SELECT 2
-- ----
SELECT current_setting('extra_float_digits') || ' ' || current_setting('application_name') FROM pg_class WHERE relname = 'visits'
-- ----
SELECT COUNT(*) AS n FROM visits WHERE age > $1
-- ----
SELECT department, COUNT(*) AS n FROM visits WHERE age >= $1 GROUP BY department
-- ----
SELECT $1::int + 1 AS after
-- ----
SELECT t.oid, typarray
FROM pg_type t JOIN pg_namespace ns
    ON typnamespace = ns.oid
WHERE typname = 'hstore'
-- ----
select pg_catalog.version()
-- ----
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind in ('r', 'p')
-- ----
            SELECT c.oid
            FROM pg_catalog.pg_class c
            LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE (pg_catalog.pg_table_is_visible(c.oid))
            AND c.relname = 'visits' AND c.relkind in
            ('r', 'v', 'm', 'f', 'p')
        
-- ----
            SELECT a.attname,
              pg_catalog.format_type(a.atttypid, a.atttypmod),
              (
                SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid)
                FROM pg_catalog.pg_attrdef d
                WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum
                AND a.atthasdef
              ) AS DEFAULT,
              a.attnotnull,
              a.attrelid as table_oid,
              pgd.description as comment,
              a.attgenerated as generated,
                              (SELECT json_build_object(
                    'always', a.attidentity = 'a',
                    'start', s.seqstart,
                    'increment', s.seqincrement,
                    'minvalue', s.seqmin,
                    'maxvalue', s.seqmax,
                    'cache', s.seqcache,
                    'cycle', s.seqcycle)
                FROM pg_catalog.pg_sequence s
                JOIN pg_catalog.pg_class c on s.seqrelid = c."oid"
                WHERE c.relkind = 'S'
                AND a.attidentity != ''
                AND s.seqrelid = pg_catalog.pg_get_serial_sequence(
                    a.attrelid::regclass::text, a.attname
                )::regclass::oid
                ) as identity_options                
            FROM pg_catalog.pg_attribute a
            LEFT JOIN pg_catalog.pg_description pgd ON (
                pgd.objoid = a.attrelid AND pgd.objsubid = a.attnum)
            WHERE a.attrelid = 16601
            AND a.attnum > 0 AND NOT a.attisdropped
            ORDER BY a.attnum
        
-- ----
            SELECT t.typname as "name",
               pg_catalog.format_type(t.typbasetype, t.typtypmod) as "attype",
               not t.typnotnull as "nullable",
               t.typdefault as "default",
               pg_catalog.pg_type_is_visible(t.oid) as "visible",
               n.nspname as "schema"
            FROM pg_catalog.pg_type t
               LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
            WHERE t.typtype = 'd'
        
-- ----
            SELECT t.typname as "name",
               -- no enum defaults in 8.4 at least
               -- t.typdefault as "default",
               pg_catalog.pg_type_is_visible(t.oid) as "visible",
               n.nspname as "schema",
               e.enumlabel as "label"
            FROM pg_catalog.pg_type t
                 LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
                 LEFT JOIN pg_catalog.pg_enum e ON t.oid = e.enumtypid
            WHERE t.typtype = 'e'
        ORDER BY "schema", "name", e.oid
-- ----
select relname from pg_class c join pg_namespace n on n.oid=c.relnamespace where pg_catalog.pg_table_is_visible(c.oid) and relname='SELECT department, COUNT(*) AS n, AVG(cost) AS avg_cost FROM visits GROUP BY department'
-- ----
select relname from pg_class c join pg_namespace n on n.oid=c.relnamespace where pg_catalog.pg_table_is_visible(c.oid) and relname='SELECT * FROM visits'
-- ----
select relname from pg_class c join pg_namespace n on n.oid=c.relnamespace where pg_catalog.pg_table_is_visible(c.oid) and relname='SELECT 1 AS one'
-- ----
select relname from pg_class c join pg_namespace n on n.oid=c.relnamespace where pg_catalog.pg_table_is_visible(c.oid) and relname='SELECT * FROM visits WHERE 1 = 0'
-- ----
SELECT * FROM visits WHERE 1 = 0
-- ----
select relname from pg_class c join pg_namespace n on n.oid=c.relnamespace where pg_catalog.pg_table_is_visible(c.oid) and relname='SELECT DISTINCT sex FROM patients ORDER BY sex'
-- ----
select 1
-- ----
SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2
-- ----
SELECT c.oid,
  n.nspname,
  c.relname
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname OPERATOR(pg_catalog.~) '^(visits)$' COLLATE pg_catalog.default
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 2, 3
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
FROM pg_catalog.pg_class c
 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
WHERE c.oid = '16629'
-- ----
SELECT a.attname,
  pg_catalog.format_type(a.atttypid, a.atttypmod),
  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
   FROM pg_catalog.pg_attrdef d
   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
  a.attnotnull,
  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
  a.attidentity,
  a.attgenerated
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = '16629' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
-- ----
SELECT pol.polname, pol.polpermissive,
  CASE WHEN pol.polroles = '{0}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,
  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),
  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),
  CASE pol.polcmd
    WHEN 'r' THEN 'SELECT'
    WHEN 'a' THEN 'INSERT'
    WHEN 'w' THEN 'UPDATE'
    WHEN 'd' THEN 'DELETE'
    END AS cmd
FROM pg_catalog.pg_policy pol
WHERE pol.polrelid = '16629' ORDER BY 1
-- ----
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid
     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid
WHERE pc.oid ='16629' and pg_catalog.pg_relation_is_publishable('16629')
UNION
SELECT pubname
     , pg_get_expr(pr.prqual, c.oid)
     , (CASE WHEN pr.prattrs IS NOT NULL THEN
         (SELECT string_agg(attname, ', ')
           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,
                pg_catalog.pg_attribute
          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])
        ELSE NULL END) FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid
     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
WHERE pr.prrelid = '16629'
UNION
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
WHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('16629')
ORDER BY 1
-- ----
SELECT c.oid::pg_catalog.regclass
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhparent AND i.inhrelid = '16629'
  AND c.relkind != 'p' AND c.relkind != 'I'
ORDER BY inhseqno
-- ----
SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhrelid AND i.inhparent = '16629'
ORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text
-- ----
SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
  CASE c.relpersistence WHEN 'p' THEN 'permanent' WHEN 't' THEN 'temporary' WHEN 'u' THEN 'unlogged' END as "Persistence",
  am.amname as "Access method",
  pg_catalog.pg_size_pretty(pg_catalog.pg_table_size(c.oid)) as "Size",
  pg_catalog.obj_description(c.oid, 'pg_class') as "Description"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2
-- ----
SELECT d.datname as "Name",
       pg_catalog.pg_get_userbyid(d.datdba) as "Owner",
       pg_catalog.pg_encoding_to_char(d.encoding) as "Encoding",
       d.datcollate as "Collate",
       d.datctype as "Ctype",
       d.daticulocale as "ICU Locale",
       CASE d.datlocprovider WHEN 'c' THEN 'libc' WHEN 'i' THEN 'icu' END AS "Locale Provider",
       pg_catalog.array_to_string(d.datacl, E'\n') AS "Access privileges"
FROM pg_catalog.pg_database d
ORDER BY 1
-- ----
SELECT d.datname as "Name",
       pg_catalog.pg_get_userbyid(d.datdba) as "Owner",
       pg_catalog.pg_encoding_to_char(d.encoding) as "Encoding",
       d.datcollate as "Collate",
       d.datctype as "Ctype",
       d.daticulocale as "ICU Locale",
       CASE d.datlocprovider WHEN 'c' THEN 'libc' WHEN 'i' THEN 'icu' END AS "Locale Provider",
       pg_catalog.array_to_string(d.datacl, E'\n') AS "Access privileges",
       CASE WHEN pg_catalog.has_database_privilege(d.datname, 'CONNECT')
          OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE')
            THEN pg_catalog.pg_size_pretty(pg_catalog.pg_database_size(d.datname))
            ELSE 'No Access'
       END as "Size",
       t.spcname as "Tablespace",
       pg_catalog.shobj_description(d.oid, 'pg_database') as "Description"
FROM pg_catalog.pg_database d
  JOIN pg_catalog.pg_tablespace t on d.dattablespace = t.oid
ORDER BY 1
-- ----
SELECT n.nspname AS "Name",
  pg_catalog.pg_get_userbyid(n.nspowner) AS "Owner"
FROM pg_catalog.pg_namespace n
WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
ORDER BY 1
-- ----
SELECT 'still' || 'usable'
-- ----
SELECT current_setting('TimeZone') || ' ' || current_setting('application_name')
-- ----
SELECT * FROM "public"."visits" WHERE 1 <> 1 LIMIT 0
-- ----
SELECT * FROM visits LIMIT 0
-- ----
SELECT * FROM (SELECT * FROM visits) "TableauSQL" WHERE (0 = 1)
-- ----
SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM, c.relname AS TABLE_NAME,  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN 'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN 'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS TABLE_TYPE, d.description AS REMARKS,  '' as TYPE_CAT, '' as TYPE_SCHEM, '' as TYPE_NAME, '' AS SELF_REFERENCING_COL_NAME, '' AS REF_GENERATION  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = n.oid  AND n.nspname LIKE 'public' AND c.relname LIKE '%' AND (false  OR ( c.relkind = 'r' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' ) )  ORDER BY TABLE_TYPE,TABLE_SCHEM,TABLE_NAME 
-- ----
SELECT * FROM (SELECT n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,nullif(a.attgenerated, '') as attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped  AND n.nspname LIKE 'public' AND c.relname LIKE 'visits') c WHERE true  AND attname LIKE '%' ORDER BY nspname,c.relname,attnum 
-- ----
SELECT        result.TABLE_CAT,        result.TABLE_SCHEM,        result.TABLE_NAME,        result.COLUMN_NAME,        result.KEY_SEQ,        result.PK_NAME FROM      (SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM,   ct.relname AS TABLE_NAME, a.attname AS COLUMN_NAME,   (information_schema._pg_expandarray(i.indkey)).n AS KEY_SEQ, ci.relname AS PK_NAME,   information_schema._pg_expandarray(i.indkey) AS KEYS, a.attnum AS A_ATTNUM FROM pg_catalog.pg_class ct   JOIN pg_catalog.pg_attribute a ON (ct.oid = a.attrelid)   JOIN pg_catalog.pg_namespace n ON (ct.relnamespace = n.oid)   JOIN pg_catalog.pg_index i ON ( a.attrelid = i.indrelid)   JOIN pg_catalog.pg_class ci ON (ci.oid = i.indexrelid) WHERE true  AND n.nspname = 'public' AND ct.relname = 'patients' AND i.indisprimary  ) result where  result.A_ATTNUM = (result.KEYS).x  ORDER BY result.table_name, result.pk_name, result.key_seq
-- ----
SELECT current_setting('extra_float_digits') || ' ' || current_setting('application_name')
-- ----
SELECT c.oid, a.attnum, a.attname, c.relname, n.nspname, a.attnotnull OR (t.typtype = 'd' AND t.typnotnull), a.attidentity != '' OR pg_catalog.pg_get_expr(d.adbin, d.adrelid) LIKE '%nextval(%' FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON (c.relnamespace = n.oid) JOIN pg_catalog.pg_attribute a ON (c.oid = a.attrelid) JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid) LEFT JOIN pg_catalog.pg_attrdef d ON (d.adrelid = a.attrelid AND d.adnum = a.attnum) JOIN (SELECT 16615 AS oid , 1 AS attnum UNION ALL SELECT 16615, 2 UNION ALL SELECT 16615, 3 UNION ALL SELECT 16615, 4 UNION ALL SELECT 16615, 5 UNION ALL SELECT 16615, 6 UNION ALL SELECT 16615, 7) vals ON (c.oid = vals.oid AND a.attnum = vals.attnum) 
-- ----
 SELECT t.c1 AS "count" FROM unnest($1::int8[]) AS t(c1)  UNION ALL  SELECT t.c1 AS "count" FROM unnest($2::int8[]) AS t(c1) 
-- ----
SELECT relpages FROM pg_class WHERE relname = 'visits'
-- ----
SELECT pg_indexes_size('patients')
-- ----
SELECT rolname FROM pg_roles
-- ----
SELECT * FROM visits WHERE false
-- ----
SELECT ';' 
-- ----
SELECT $1::text FROM visits
-- ----
SELECT SUM(cost) FROM visits WHERE age BETWEEN $1 AND $2
-- ----
SELECT pg_total_relation_size('public.visits')
-- ----
SELECT current_user, session_user
-- ----
SELECT attname FROM pg_attribute WHERE attrelid = 'visits'::regclass AND attnum > 0
-- ----
SELECT E'\';'
-- ----
SELECT COUNT(*) FROM visits WHERE $1
-- ----
SELECT COUNT(*) FROM visits WHERE patient_id = $1
-- ----
SELECT $1::text
-- ----
SELECT pg_relation_size('visits')
-- ----
SELECT relname, reltuples FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace
-- ----
SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'
-- ----
SELECT cost FROM visits LIMIT 0
-- ----
SELECT $$;$$
-- ----
SELECT COUNT(*) FROM visits WHERE diagnosis = $1
-- ----
SELECT COALESCE(SUM(reltuples), 0)::bigint FROM pg_class WHERE relname IN ('visits', 'patients')
-- ----
SELECT pg_table_size('patients')
-- ----
SELECT pg_database_size(current_database())
-- ----
SELECT version()
-- ----
SELECT has_table_privilege('visits', 'INSERT')
-- ----
SELECT name, setting FROM pg_settings WHERE name = 'port'
-- ----
SELECT * FROM visits WHERE patient_id = $1
-- ----
SELECT COUNT(*) FROM visits WHERE visit_date > $1
-- ----
SELECT COUNT(*) FROM visits WHERE department = $1
-- ----
SELECT department, COUNT(*) FROM visits WHERE patient_id = $1 GROUP BY department
-- ----
SELECT cost FROM visits WHERE patient_id = $1
-- ----
SELECT 'alive' AS a
-- ----
select proname, oid from pg_catalog.pg_proc where proname in ('lo_open', 'lo_close', 'lo_creat', 'lo_create', 'lo_unlink', 'lo_lseek', 'lo_lseek64', 'lo_tell', 'lo_tell64', 'lo_truncate', 'lo_truncate64', 'loread', 'lowrite') and pronamespace = (select oid from pg_catalog.pg_namespace where nspname = 'pg_catalog')
-- ----
SELECT oid as "ID",
  pg_catalog.pg_get_userbyid(lomowner) as "Owner",
  pg_catalog.obj_description(oid, 'pg_largeobject') as "Description"
FROM pg_catalog.pg_largeobject_metadata
ORDER BY oid
-- ----
SELECT 'SELECT cost FROM visits' 
-- ----
SELECT 'DELETE FROM visits' 
-- ----
SELECT "t0"."region" AS "region", "t0"."c" AS "c" FROM ( SELECT t.c1 AS "region", t.c2 AS "c" FROM unnest($1::text[], $2::int8[]) AS t(c1, c2) ) "t0" ORDER BY 2 DESC LIMIT 3
-- ----
SELECT a.region, a.c, b.avg_by FROM ( SELECT t.c1 AS "region", t.c2 AS "c" FROM unnest($1::text[], $2::int8[]) AS t(c1, c2) ) a JOIN ( SELECT t.c1 AS "region", t.c2 AS "avg_by" FROM unnest($3::text[], $4::numeric[]) AS t(c1, c2) ) b ON a.region = b.region
-- ----
SELECT "source"."sex" AS "sex", "source"."n" AS "n" FROM ( SELECT t.c1 AS "sex", t.c2 AS "n" FROM unnest($1::text[], $2::int8[]) AS t(c1, c2) ) AS "source" LIMIT 2000
-- ----
select "_"."region", "_"."a0" from ( SELECT t.c1 AS "region", t.c2 AS "a0" FROM unnest($1::text[], $2::int8[]) AS t(c1, c2) ) "_" where not "_"."a0" is null limit 1000001
-- ----
SELECT "_k1" AS "patients.region", "_a1" AS "patients.count", SUM( "_a1" ) OVER () AS "patients.total" FROM ( SELECT t.c1 AS "_k1", t.c2 AS "_a1" FROM unnest($1::text[], $2::int8[]) AS t(c1, c2) ) AS "dp_aggregate" ORDER BY 2 DESC 
-- ----
SELECT sex, n FROM ( SELECT t.c1 AS "sex", t.c2 AS "n" FROM unnest($1::text[], $2::int8[]) AS t(c1, c2) ) a UNION ALL SELECT 'Total', n FROM ( SELECT t.c1 AS "n" FROM unnest($3::int8[]) AS t(c1) ) b
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
FROM pg_catalog.pg_class c
 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
WHERE c.oid = '16435'
-- ----
SELECT a.attname,
  pg_catalog.format_type(a.atttypid, a.atttypmod),
  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
   FROM pg_catalog.pg_attrdef d
   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
  a.attnotnull,
  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
  a.attidentity,
  a.attgenerated
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = '16435' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
-- ----
SELECT pol.polname, pol.polpermissive,
  CASE WHEN pol.polroles = '{0}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,
  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),
  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),
  CASE pol.polcmd
    WHEN 'r' THEN 'SELECT'
    WHEN 'a' THEN 'INSERT'
    WHEN 'w' THEN 'UPDATE'
    WHEN 'd' THEN 'DELETE'
    END AS cmd
FROM pg_catalog.pg_policy pol
WHERE pol.polrelid = '16435' ORDER BY 1
-- ----
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid
     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid
WHERE pc.oid ='16435' and pg_catalog.pg_relation_is_publishable('16435')
UNION
SELECT pubname
     , pg_get_expr(pr.prqual, c.oid)
     , (CASE WHEN pr.prattrs IS NOT NULL THEN
         (SELECT string_agg(attname, ', ')
           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,
                pg_catalog.pg_attribute
          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])
        ELSE NULL END) FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid
     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
WHERE pr.prrelid = '16435'
UNION
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
WHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('16435')
ORDER BY 1
-- ----
SELECT c.oid::pg_catalog.regclass
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhparent AND i.inhrelid = '16435'
  AND c.relkind != 'p' AND c.relkind != 'I'
ORDER BY inhseqno
-- ----
SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhrelid AND i.inhparent = '16435'
ORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text
-- ----
SELECT department, COUNT(*) AS n FROM visits WHERE age > $1 GROUP BY department
-- ----
SELECT COUNT(*) FROM visits WHERE visit_date >= $1 AND age > $2
-- ----
SELECT COUNT(*) AS n FROM visits WHERE visit_date >= $1
-- ----
SELECT department, COUNT(*) AS n FROM visits WHERE visit_date BETWEEN $1 AND $2 GROUP BY department
-- ----
SELECT 1 AS after
-- ----
SELECT COUNT(*) FROM visits WHERE patient_id = $1 AND diagnosis LIKE $2
-- ----
SELECT 'still in the transaction' AS t
-- ----
SELECT * FROM wards ORDER BY ward_id
-- ----
SELECT count(*) FROM wards
-- ----
SELECT c.oid,
  n.nspname,
  c.relname
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname OPERATOR(pg_catalog.~) '^(wards)$' COLLATE pg_catalog.default
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 2, 3
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
FROM pg_catalog.pg_class c
 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
WHERE c.oid = '16390'
-- ----
SELECT a.attname,
  pg_catalog.format_type(a.atttypid, a.atttypmod),
  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
   FROM pg_catalog.pg_attrdef d
   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
  a.attnotnull,
  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
  a.attidentity,
  a.attgenerated
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = '16390' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
-- ----
SELECT c2.relname, i.indisprimary, i.indisunique, i.indisclustered, i.indisvalid, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true),
  pg_catalog.pg_get_constraintdef(con.oid, true), contype, condeferrable, condeferred, i.indisreplident, c2.reltablespace
FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i
  LEFT JOIN pg_catalog.pg_constraint con ON (conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x'))
WHERE c.oid = '16390' AND c.oid = i.indrelid AND i.indexrelid = c2.oid
ORDER BY i.indisprimary DESC, c2.relname
-- ----
SELECT pol.polname, pol.polpermissive,
  CASE WHEN pol.polroles = '{0}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,
  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),
  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),
  CASE pol.polcmd
    WHEN 'r' THEN 'SELECT'
    WHEN 'a' THEN 'INSERT'
    WHEN 'w' THEN 'UPDATE'
    WHEN 'd' THEN 'DELETE'
    END AS cmd
FROM pg_catalog.pg_policy pol
WHERE pol.polrelid = '16390' ORDER BY 1
-- ----
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid
     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid
WHERE pc.oid ='16390' and pg_catalog.pg_relation_is_publishable('16390')
UNION
SELECT pubname
     , pg_get_expr(pr.prqual, c.oid)
     , (CASE WHEN pr.prattrs IS NOT NULL THEN
         (SELECT string_agg(attname, ', ')
           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,
                pg_catalog.pg_attribute
          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])
        ELSE NULL END) FROM pg_catalog.pg_publication p
     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid
     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
WHERE pr.prrelid = '16390'
UNION
SELECT pubname
     , NULL
     , NULL
FROM pg_catalog.pg_publication p
WHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('16390')
ORDER BY 1
-- ----
SELECT c.oid::pg_catalog.regclass
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhparent AND i.inhrelid = '16390'
  AND c.relkind != 'p' AND c.relkind != 'I'
ORDER BY inhseqno
-- ----
SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)
FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
WHERE c.oid = i.inhrelid AND i.inhparent = '16390'
ORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text
-- ----
SELECT wing, beds FROM wards WHERE ward_id =  '3' 
-- ----
SELECT wing, beds FROM wards WHERE ward_id = $1
-- ----
SELECT string_agg(wing, ',' ORDER BY wing) FROM (SELECT DISTINCT wing FROM wards) w
-- ----
SELECT DISTINCT wing FROM wards ORDER BY wing
-- ----
SELECT count(*) FROM wards a JOIN wards b ON a.wing = b.wing
-- ----
SELECT * FROM wards WHERE beds >= $1 ORDER BY ward_id
-- ----
SELECT * FROM (SELECT n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,nullif(a.attgenerated, '') as attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped  AND n.nspname LIKE 'public' AND c.relname LIKE 'wards') c WHERE true  ORDER BY nspname,c.relname,attnum 
-- ----
SELECT ward_id FROM wards
-- ----
SELECT * FROM wards WHERE beds >= 0 ORDER BY ward_id
-- ----
SELECT count(*) FROM pg_database WHERE datname IN ('dpproxy_ledger', 'hospital_shadow')
-- ----
SELECT pg_database_size('hospital') || ' ' || pg_database_size(current_database())
-- ----
SELECT pg_total_relation_size('visits')
-- ----
SELECT reltuples FROM pg_class WHERE relname = 'visits'
-- ----
SELECT current_database()
-- ----
SELECT nspname AS TABLE_SCHEM, NULL AS TABLE_CATALOG FROM pg_catalog.pg_namespace  WHERE nspname <> 'pg_toast' AND (nspname !~ '^pg_temp_'  OR nspname = (pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_'  OR nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', 'pg_toast_temp_'))  ORDER BY TABLE_SCHEM
-- ----
SELECT nspname AS TABLE_SCHEM, NULL AS TABLE_CATALOG FROM pg_catalog.pg_namespace  WHERE nspname <> 'pg_toast' AND (nspname !~ '^pg_temp_'  OR nspname = (pg_catalog.current_schemas(true))[1]) AND (nspname !~ '^pg_toast_temp_'  OR nspname = replace((pg_catalog.current_schemas(true))[1], 'pg_temp_', 'pg_toast_temp_'))  AND nspname LIKE 'pub%' ORDER BY TABLE_SCHEM
-- ----
SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM, c.relname AS TABLE_NAME,  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN 'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN 'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS TABLE_TYPE, d.description AS REMARKS,  '' as TYPE_CAT, '' as TYPE_SCHEM, '' as TYPE_NAME, '' AS SELF_REFERENCING_COL_NAME, '' AS REF_GENERATION  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = n.oid  AND c.relname LIKE '%' ORDER BY TABLE_TYPE,TABLE_SCHEM,TABLE_NAME
-- ----
SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM, c.relname AS TABLE_NAME,  CASE n.nspname ~ '^pg_' OR n.nspname = 'information_schema'  WHEN true THEN CASE  WHEN n.nspname = 'pg_catalog' OR n.nspname = 'information_schema' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TABLE'   WHEN 'v' THEN 'SYSTEM VIEW'   WHEN 'i' THEN 'SYSTEM INDEX'   ELSE NULL   END  WHEN n.nspname = 'pg_toast' THEN CASE c.relkind   WHEN 'r' THEN 'SYSTEM TOAST TABLE'   WHEN 'i' THEN 'SYSTEM TOAST INDEX'   ELSE NULL   END  ELSE CASE c.relkind   WHEN 'r' THEN 'TEMPORARY TABLE'   WHEN 'p' THEN 'TEMPORARY TABLE'   WHEN 'i' THEN 'TEMPORARY INDEX'   WHEN 'S' THEN 'TEMPORARY SEQUENCE'   WHEN 'v' THEN 'TEMPORARY VIEW'   ELSE NULL   END  END  WHEN false THEN CASE c.relkind  WHEN 'r' THEN 'TABLE'  WHEN 'p' THEN 'PARTITIONED TABLE'  WHEN 'i' THEN 'INDEX'  WHEN 'P' then 'PARTITIONED INDEX'  WHEN 'S' THEN 'SEQUENCE'  WHEN 'v' THEN 'VIEW'  WHEN 'c' THEN 'TYPE'  WHEN 'f' THEN 'FOREIGN TABLE'  WHEN 'm' THEN 'MATERIALIZED VIEW'  ELSE NULL  END  ELSE NULL  END  AS TABLE_TYPE, d.description AS REMARKS,  '' as TYPE_CAT, '' as TYPE_SCHEM, '' as TYPE_NAME, '' AS SELF_REFERENCING_COL_NAME, '' AS REF_GENERATION  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c  LEFT JOIN pg_catalog.pg_description d ON (c.oid = d.objoid AND d.objsubid = 0  and d.classoid = 'pg_class'::regclass)  WHERE c.relnamespace = n.oid  AND n.nspname LIKE 'public' AND c.relname LIKE '%' AND (false  OR ( c.relkind = 'r' AND n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' )  OR ( c.relkind = 'v' AND n.nspname <> 'pg_catalog' AND n.nspname <> 'information_schema' ) )  ORDER BY TABLE_TYPE,TABLE_SCHEM,TABLE_NAME
-- ----
SELECT * FROM (SELECT n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,nullif(a.attgenerated, '') as attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped  AND n.nspname LIKE 'public' AND c.relname LIKE 'visits') c WHERE true  AND attname LIKE '%' ORDER BY nspname,c.relname,attnum
-- ----
SELECT * FROM (SELECT n.nspname,c.relname,a.attname,a.atttypid,a.attnotnull OR (t.typtype = 'd' AND t.typnotnull) AS attnotnull,a.atttypmod,a.attlen,t.typtypmod,row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) AS attnum, nullif(a.attidentity, '') as attidentity,nullif(a.attgenerated, '') as attgenerated,pg_catalog.pg_get_expr(def.adbin, def.adrelid) AS adsrc,dsc.description,t.typbasetype,t.typtype  FROM pg_catalog.pg_namespace n  JOIN pg_catalog.pg_class c ON (c.relnamespace = n.oid)  JOIN pg_catalog.pg_attribute a ON (a.attrelid=c.oid)  JOIN pg_catalog.pg_type t ON (a.atttypid = t.oid)  LEFT JOIN pg_catalog.pg_attrdef def ON (a.attrelid=def.adrelid AND a.attnum = def.adnum)  LEFT JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)  LEFT JOIN pg_catalog.pg_class dc ON (dc.oid=dsc.classoid AND dc.relname='pg_class')  LEFT JOIN pg_catalog.pg_namespace dn ON (dc.relnamespace=dn.oid AND dn.nspname='pg_catalog')  WHERE c.relkind in ('r','p','v','f','m') and a.attnum > 0 AND NOT a.attisdropped  AND c.relname LIKE '%') c WHERE true  AND attname LIKE '%' ORDER BY nspname,c.relname,attnum
-- ----
SELECT n.nspname = ANY(current_schemas(true)), n.nspname, t.typname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON t.typnamespace = n.oid WHERE t.oid = $1
-- ----
SELECT typinput='pg_catalog.array_in'::regproc as is_array, typtype, typname, pg_type.oid   FROM pg_catalog.pg_type   LEFT JOIN (select ns.oid as nspoid, ns.nspname, r.r           from pg_namespace as ns           join ( select s.r, (current_schemas(false))[s.r] as nspname                    from generate_series(1, array_upper(current_schemas(false), 1)) as s(r) ) as r          using ( nspname )        ) as sp     ON sp.nspoid = typnamespace  WHERE pg_type.oid = $1  ORDER BY sp.r, pg_type.oid DESC
-- ----
SELECT setting FROM pg_catalog.pg_settings WHERE name='max_index_keys'
-- ----
SELECT NULL::text AS PKTABLE_CAT, pkn.nspname AS PKTABLE_SCHEM, pkc.relname AS PKTABLE_NAME, pka.attname AS PKCOLUMN_NAME, NULL::text AS FKTABLE_CAT, fkn.nspname AS FKTABLE_SCHEM, fkc.relname AS FKTABLE_NAME, fka.attname AS FKCOLUMN_NAME, pos.n AS KEY_SEQ, CASE con.confupdtype  WHEN 'c' THEN 0 WHEN 'n' THEN 2 WHEN 'd' THEN 4 WHEN 'r' THEN 1 WHEN 'p' THEN 1 WHEN 'a' THEN 3 ELSE NULL END AS UPDATE_RULE, CASE con.confdeltype  WHEN 'c' THEN 0 WHEN 'n' THEN 2 WHEN 'd' THEN 4 WHEN 'r' THEN 1 WHEN 'p' THEN 1 WHEN 'a' THEN 3 ELSE NULL END AS DELETE_RULE, con.conname AS FK_NAME, pkic.relname AS PK_NAME, CASE  WHEN con.condeferrable AND con.condeferred THEN 5 WHEN con.condeferrable THEN 6 ELSE 7 END AS DEFERRABILITY  FROM  pg_catalog.pg_namespace pkn, pg_catalog.pg_class pkc, pg_catalog.pg_attribute pka,  pg_catalog.pg_namespace fkn, pg_catalog.pg_class fkc, pg_catalog.pg_attribute fka,  pg_catalog.pg_constraint con,  pg_catalog.generate_series(1, 32) pos(n),  pg_catalog.pg_class pkic WHERE pkn.oid = pkc.relnamespace AND pkc.oid = pka.attrelid AND pka.attnum = con.confkey[pos.n] AND con.confrelid = pkc.oid  AND fkn.oid = fkc.relnamespace AND fkc.oid = fka.attrelid AND fka.attnum = con.conkey[pos.n] AND con.conrelid = fkc.oid  AND con.contype = 'f' AND (pkic.relkind = 'i' OR pkic.relkind = 'I') AND pkic.oid = con.conindid  AND fkn.nspname = 'public' AND fkc.relname = 'visits' ORDER BY pkn.nspname,pkc.relname, con.conname,pos.n
-- ----
SELECT NULL::text AS PKTABLE_CAT, pkn.nspname AS PKTABLE_SCHEM, pkc.relname AS PKTABLE_NAME, pka.attname AS PKCOLUMN_NAME, NULL::text AS FKTABLE_CAT, fkn.nspname AS FKTABLE_SCHEM, fkc.relname AS FKTABLE_NAME, fka.attname AS FKCOLUMN_NAME, pos.n AS KEY_SEQ, CASE con.confupdtype  WHEN 'c' THEN 0 WHEN 'n' THEN 2 WHEN 'd' THEN 4 WHEN 'r' THEN 1 WHEN 'p' THEN 1 WHEN 'a' THEN 3 ELSE NULL END AS UPDATE_RULE, CASE con.confdeltype  WHEN 'c' THEN 0 WHEN 'n' THEN 2 WHEN 'd' THEN 4 WHEN 'r' THEN 1 WHEN 'p' THEN 1 WHEN 'a' THEN 3 ELSE NULL END AS DELETE_RULE, con.conname AS FK_NAME, pkic.relname AS PK_NAME, CASE  WHEN con.condeferrable AND con.condeferred THEN 5 WHEN con.condeferrable THEN 6 ELSE 7 END AS DEFERRABILITY  FROM  pg_catalog.pg_namespace pkn, pg_catalog.pg_class pkc, pg_catalog.pg_attribute pka,  pg_catalog.pg_namespace fkn, pg_catalog.pg_class fkc, pg_catalog.pg_attribute fka,  pg_catalog.pg_constraint con,  pg_catalog.generate_series(1, 32) pos(n),  pg_catalog.pg_class pkic WHERE pkn.oid = pkc.relnamespace AND pkc.oid = pka.attrelid AND pka.attnum = con.confkey[pos.n] AND con.confrelid = pkc.oid  AND fkn.oid = fkc.relnamespace AND fkc.oid = fka.attrelid AND fka.attnum = con.conkey[pos.n] AND con.conrelid = fkc.oid  AND con.contype = 'f' AND (pkic.relkind = 'i' OR pkic.relkind = 'I') AND pkic.oid = con.conindid  AND pkn.nspname = 'public' AND pkc.relname = 'patients' ORDER BY fkn.nspname,fkc.relname,con.conname,pos.n
-- ----
SELECT NULL::text AS PKTABLE_CAT, pkn.nspname AS PKTABLE_SCHEM, pkc.relname AS PKTABLE_NAME, pka.attname AS PKCOLUMN_NAME, NULL::text AS FKTABLE_CAT, fkn.nspname AS FKTABLE_SCHEM, fkc.relname AS FKTABLE_NAME, fka.attname AS FKCOLUMN_NAME, pos.n AS KEY_SEQ, CASE con.confupdtype  WHEN 'c' THEN 0 WHEN 'n' THEN 2 WHEN 'd' THEN 4 WHEN 'r' THEN 1 WHEN 'p' THEN 1 WHEN 'a' THEN 3 ELSE NULL END AS UPDATE_RULE, CASE con.confdeltype  WHEN 'c' THEN 0 WHEN 'n' THEN 2 WHEN 'd' THEN 4 WHEN 'r' THEN 1 WHEN 'p' THEN 1 WHEN 'a' THEN 3 ELSE NULL END AS DELETE_RULE, con.conname AS FK_NAME, pkic.relname AS PK_NAME, CASE  WHEN con.condeferrable AND con.condeferred THEN 5 WHEN con.condeferrable THEN 6 ELSE 7 END AS DEFERRABILITY  FROM  pg_catalog.pg_namespace pkn, pg_catalog.pg_class pkc, pg_catalog.pg_attribute pka,  pg_catalog.pg_namespace fkn, pg_catalog.pg_class fkc, pg_catalog.pg_attribute fka,  pg_catalog.pg_constraint con,  pg_catalog.generate_series(1, 32) pos(n),  pg_catalog.pg_class pkic WHERE pkn.oid = pkc.relnamespace AND pkc.oid = pka.attrelid AND pka.attnum = con.confkey[pos.n] AND con.confrelid = pkc.oid  AND fkn.oid = fkc.relnamespace AND fkc.oid = fka.attrelid AND fka.attnum = con.conkey[pos.n] AND con.conrelid = fkc.oid  AND con.contype = 'f' AND (pkic.relkind = 'i' OR pkic.relkind = 'I') AND pkic.oid = con.conindid  AND pkn.nspname = 'public' AND fkn.nspname = 'public' AND pkc.relname = 'patients' AND fkc.relname = 'visits' ORDER BY fkn.nspname,fkc.relname,con.conname,pos.n
-- ----
SELECT     tmp.TABLE_CAT,     tmp.TABLE_SCHEM,     tmp.TABLE_NAME,     tmp.NON_UNIQUE,     tmp.INDEX_QUALIFIER,     tmp.INDEX_NAME,     tmp.TYPE,     tmp.ORDINAL_POSITION,     trim(both '"' from pg_catalog.pg_get_indexdef(tmp.CI_OID, tmp.ORDINAL_POSITION, false)) AS COLUMN_NAME,   CASE tmp.AM_NAME     WHEN 'btree' THEN CASE tmp.I_INDOPTION[tmp.ORDINAL_POSITION - 1] & 1::smallint       WHEN 1 THEN 'D'       ELSE 'A'     END     ELSE NULL   END AS ASC_OR_DESC,     tmp.CARDINALITY,     tmp.PAGES,     tmp.FILTER_CONDITION FROM (SELECT NULL AS TABLE_CAT, n.nspname AS TABLE_SCHEM,   ct.relname AS TABLE_NAME, NOT i.indisunique AS NON_UNIQUE,   NULL AS INDEX_QUALIFIER, ci.relname AS INDEX_NAME,   CASE i.indisclustered     WHEN true THEN 1    ELSE CASE am.amname       WHEN 'hash' THEN 2      ELSE 3    END   END AS TYPE,   (information_schema._pg_expandarray(i.indkey)).n AS ORDINAL_POSITION,   ci.reltuples AS CARDINALITY,   ci.relpages AS PAGES,   pg_catalog.pg_get_expr(i.indpred, i.indrelid) AS FILTER_CONDITION,   ci.oid AS CI_OID,   i.indoption AS I_INDOPTION,   am.amname AS AM_NAME FROM pg_catalog.pg_class ct   JOIN pg_catalog.pg_namespace n ON (ct.relnamespace = n.oid)   JOIN pg_catalog.pg_index i ON (ct.oid = i.indrelid)   JOIN pg_catalog.pg_class ci ON (ci.oid = i.indexrelid)   JOIN pg_catalog.pg_am am ON (ci.relam = am.oid) WHERE true  AND n.nspname = 'public' AND ct.relname = 'patients') AS tmp ORDER BY NON_UNIQUE, TYPE, INDEX_NAME, ORDINAL_POSITION
-- ----
SELECT a.attname, a.atttypid, atttypmod FROM pg_catalog.pg_class ct   JOIN pg_catalog.pg_attribute a ON (ct.oid = a.attrelid)   JOIN pg_catalog.pg_namespace n ON (ct.relnamespace = n.oid)   JOIN (SELECT i.indexrelid, i.indrelid, i.indisprimary,              information_schema._pg_expandarray(i.indkey) AS keys         FROM pg_catalog.pg_index i) i     ON (a.attnum = (i.keys).x AND a.attrelid = i.indrelid) WHERE true  AND n.nspname = 'public' AND ct.relname = 'patients' AND i.indisprimary  ORDER BY a.attnum
-- ----
SELECT pg_type.oid, typname   FROM pg_catalog.pg_type   LEFT   JOIN (select ns.oid as nspoid, ns.nspname, r.r           from pg_namespace as ns           join ( select s.r, (current_schemas(false))[s.r] as nspname                    from generate_series(1, array_upper(current_schemas(false), 1)) as s(r) ) as r          using ( nspname )        ) as sp     ON sp.nspoid = typnamespace  WHERE typname = $1  ORDER BY sp.r, pg_type.oid DESC LIMIT 1
-- ----
SELECT n.nspname,c.relname,r.rolname,c.relacl  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c, pg_catalog.pg_roles r  WHERE c.relnamespace = n.oid  AND c.relowner = r.oid  AND c.relkind IN ('r','p','v','m','f')  AND n.nspname LIKE 'public' AND c.relname LIKE '%' ORDER BY nspname, relname
-- ----
SELECT n.nspname,c.relname,r.rolname,c.relacl, a.attacl,  a.attname  FROM pg_catalog.pg_namespace n, pg_catalog.pg_class c,  pg_catalog.pg_roles r, pg_catalog.pg_attribute a  WHERE c.relnamespace = n.oid  AND c.relowner = r.oid  AND c.oid = a.attrelid  AND c.relkind = 'r'  AND a.attnum > 0 AND NOT a.attisdropped  AND n.nspname = 'public' AND c.relname = 'visits' AND a.attname LIKE '%' ORDER BY attname
-- ----
SELECT NULL AS PROCEDURE_CAT, n.nspname AS PROCEDURE_SCHEM, p.proname AS PROCEDURE_NAME, NULL, NULL, NULL, d.description AS REMARKS, 2 AS PROCEDURE_TYPE,  p.proname || '_' || p.oid AS SPECIFIC_NAME  FROM pg_catalog.pg_namespace n, pg_catalog.pg_proc p  LEFT JOIN pg_catalog.pg_description d ON (p.oid=d.objoid)  LEFT JOIN pg_catalog.pg_class c ON (d.classoid=c.oid AND c.relname='pg_proc')  LEFT JOIN pg_catalog.pg_namespace pn ON (c.relnamespace=pn.oid AND pn.nspname='pg_catalog')  WHERE p.pronamespace=n.oid  AND p.prokind='p' AND n.nspname LIKE 'public' AND p.proname LIKE '%' ORDER BY PROCEDURE_SCHEM, PROCEDURE_NAME, p.oid::text
-- ----
SELECT n.nspname,p.proname,p.prorettype,p.proargtypes, t.typtype,t.typrelid,  p.proargnames, p.proargmodes, p.proallargtypes, p.oid  FROM pg_catalog.pg_proc p, pg_catalog.pg_namespace n, pg_catalog.pg_type t  WHERE p.pronamespace=n.oid AND p.prorettype=t.oid  AND n.nspname LIKE 'pg_catalog' AND p.proname LIKE 'abs' ORDER BY n.nspname, p.proname, p.oid::text
-- ----
SELECT current_database() AS FUNCTION_CAT, n.nspname AS FUNCTION_SCHEM, p.proname AS FUNCTION_NAME,  d.description AS REMARKS,  CASE    WHEN (format_type(p.prorettype, null) = 'unknown') THEN 0   WHEN      (substring(pg_get_function_result(p.oid) from 0 for 6) = 'TABLE') OR      (substring(pg_get_function_result(p.oid) from 0 for 6) = 'SETOF') THEN 2   ELSE 1 END  AS FUNCTION_TYPE,  p.proname || '_' || p.oid AS SPECIFIC_NAME FROM pg_catalog.pg_proc p INNER JOIN pg_catalog.pg_namespace n ON p.pronamespace=n.oid LEFT JOIN pg_catalog.pg_description d ON p.oid=d.objoid WHERE true   AND p.prokind='f' AND n.nspname LIKE 'pg_catalog' AND p.proname LIKE 'abs' ORDER BY FUNCTION_SCHEM, FUNCTION_NAME, p.oid::text
-- ----
SELECT t.typname,t.oid FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON (t.typnamespace = n.oid)  WHERE n.nspname  != 'pg_toast' AND  (t.typrelid = 0 OR (SELECT c.relkind = 'c' FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid))
-- ----
SELECT typinput='pg_catalog.array_in'::regproc as is_array, typtype, typname, pg_type.oid   FROM pg_catalog.pg_type   LEFT JOIN (select ns.oid as nspoid, ns.nspname, r.r           from pg_namespace as ns           join ( select s.r, (current_schemas(false))[s.r] as nspname                    from generate_series(1, array_upper(current_schemas(false), 1)) as s(r) ) as r          using ( nspname )        ) as sp     ON sp.nspoid = typnamespace  ORDER BY sp.r, pg_type.oid DESC
-- ----
select null as type_cat, n.nspname as type_schem, t.typname as type_name,  null as class_name, CASE WHEN t.typtype='c' then 2002 else 2001 end as data_type, pg_catalog.obj_description(t.oid, 'pg_type')  as remarks, CASE WHEN t.typtype = 'd' then  (select CASE when base_type.oid = 13312 then 2002 when base_type.oid = 4096 then 1111 when base_type.oid = 4097 then 2003 when base_type.oid = 16386 then 2003 when base_type.oid = 12290 then 2003 when base_type.oid = 16387 then 2002 when base_type.oid = 12291 then 2002 when base_type.oid = 1027 then 2003 when base_type.oid = 1028 then 2003 when base_type.oid = 13316 then 2003 when base_type.oid = 13317 then 2002 when base_type.oid = 12294 then 2003 when base_type.oid = 6150 then 2003 when base_type.oid = 12295 then 2002 when base_type.oid = 6151 then 2003 when base_type.oid = 6152 then 2003 when base_type.oid = 13321 then 2003 when base_type.oid = 6153 then 2003 when base_type.oid = 1033 then 1111 when base_type.oid = 1034 then 2003 when base_type.oid = 16394 then 2003 when base_type.oid = 13322 then 2002 when base_type.oid = 12298 then 2003 when base_type.oid = 16395 then 2002 when base_type.oid = 12299 then 2002 when base_type.oid = 6155 then 2003 when base_type.oid = 6157 then 2003 when base_type.oid = 13326 then 2003 when base_type.oid = 13327 then 2002 when base_type.oid = 12303 then 2003 when base_type.oid = 16 then -7 when base_type.oid = 12304 then 2002 when base_type.oid = 1040 then 2003 when base_type.oid = 17 then -2 when base_type.oid = 1041 then 2003 when base_type.oid = 18 then 1 when base_type.oid = 1042 then 1 when base_type.oid = 16402 then 2003 when base_type.oid = 13330 then 2003 when base_type.oid = 1043 then 12 when base_type.oid = 19 then 12 when base_type.oid = 16403 then 2002 when base_type.oid = 13331 then 2002 when base_type.oid = 20 then -5 when base_type.oid = 12308 then 2003 when base_type.oid = 21 then 5 when base_type.oid = 12309 then 2002 when base_type.oid = 22 then 1111 when base_type.oid = 23 then 4 when base_type.oid = 13335 then 2003 when base_type.oid = 24 then 1111 when base_type.oid = 13336 then 2002 when base_type.oid = 25 then 12 when base_type.oid = 12313 then 2003 when base_type.oid = 26 then -5 when base_type.oid = 12314 then 2002 when base_type.oid = 27 then 1111 when base_type.oid = 28 then 1111 when base_type.oid = 13340 then 2003 when base_type.oid = 13341 then 2002 when base_type.oid = 29 then 1111 when base_type.oid = 30 then 1111 when base_type.oid = 16414 then 2003 when base_type.oid = 12318 then 2003 when base_type.oid = 16415 then 2002 when base_type.oid = 12319 then 2002 when base_type.oid = 32 then 1111 when base_type.oid = 13345 then 2003 when base_type.oid = 16418 then 2003 when base_type.oid = 13346 then 2002 when base_type.oid = 16419 then 12 when base_type.oid = 12323 then 2003 when base_type.oid = 12324 then 2002 when base_type.oid = 13349 then 2003 when base_type.oid = 13350 then 2002 when base_type.oid = 16423 then 2003 when base_type.oid = 16424 then 2001 when base_type.oid = 12328 then 2003 when base_type.oid = 12329 then 2002 when base_type.oid = 13354 then 2003 when base_type.oid = 13355 then 2002 when base_type.oid = 3115 then 1111 when base_type.oid = 16428 then 2003 when base_type.oid = 16429 then 2002 when base_type.oid = 12333 then 2003 when base_type.oid = 12334 then 2002 when base_type.oid = 13359 then 2003 when base_type.oid = 13360 then 2002 when base_type.oid = 12337 then 2003 when base_type.oid = 12338 then 2002 when base_type.oid = 13363 then 2003 when base_type.oid = 13364 then 2002 when base_type.oid = 13368 then 2003 when base_type.oid = 13369 then 2002 when base_type.oid = 1082 then 91 when base_type.oid = 1083 then 92 when base_type.oid = 13373 then 2003 when base_type.oid = 13374 then 2002 when base_type.oid = 13378 then 2003 when base_type.oid = 13379 then 2002 when base_type.oid = 13383 then 2003 when base_type.oid = 71 then 2002 when base_type.oid = 13384 then 2002 when base_type.oid = 13387 then 2003 when base_type.oid = 75 then 2002 when base_type.oid = 13388 then 2002 when base_type.oid = 13392 then 2003 when base_type.oid = 13393 then 2002 when base_type.oid = 81 then 2002 when base_type.oid = 83 then 2002 when base_type.oid = 13397 then 2003 when base_type.oid = 13398 then 2002 when base_type.oid = 1114 then 93 when base_type.oid = 13402 then 2003 when base_type.oid = 1115 then 2003 when base_type.oid = 13403 then 2002 when base_type.oid = 13407 then 2003 when base_type.oid = 4191 then 1111 when base_type.oid = 13408 then 2002 when base_type.oid = 4192 then 2003 when base_type.oid = 13412 then 2003 when base_type.oid = 13413 then 2002 when base_type.oid = 13417 then 2003 when base_type.oid = 13418 then 2002 when base_type.oid = 13422 then 2003 when base_type.oid = 13423 then 2002 when base_type.oid = 114 then 1111 when base_type.oid = 13426 then 2003 when base_type.oid = 13427 then 2002 when base_type.oid = 13431 then 2003 when base_type.oid = 13432 then 2002 when base_type.oid = 13436 then 2003 when base_type.oid = 13437 then 2002 when base_type.oid = 13441 then 2003 when base_type.oid = 13442 then 2002 when base_type.oid = 13446 then 2003 when base_type.oid = 13447 then 2002 when base_type.oid = 13451 then 2003 when base_type.oid = 13452 then 2002 when base_type.oid = 142 then 2009 when base_type.oid = 143 then 2003 when base_type.oid = 13455 then 2003 when base_type.oid = 13456 then 2002 when base_type.oid = 3220 then 1111 when base_type.oid = 13460 then 2003 when base_type.oid = 13461 then 2002 when base_type.oid = 3221 then 2003 when base_type.oid = 13464 then 2003 when base_type.oid = 2201 then 2003 when base_type.oid = 13465 then 2002 when base_type.oid = 2202 then 1111 when base_type.oid = 2203 then 1111 when base_type.oid = 2204 then 1111 when base_type.oid = 13469 then 2003 when base_type.oid = 2205 then 1111 when base_type.oid = 1182 then 2003 when base_type.oid = 2206 then 1111 when base_type.oid = 13470 then 2002 when base_type.oid = 1183 then 2003 when base_type.oid = 2207 then 2003 when base_type.oid = 1184 then 93 when base_type.oid = 2208 then 2003 when base_type.oid = 1185 then 2003 when base_type.oid = 2209 then 2003 when base_type.oid = 1186 then 1111 when base_type.oid = 13474 then 2003 when base_type.oid = 2210 then 2003 when base_type.oid = 2211 then 2003 when base_type.oid = 13475 then 2002 when base_type.oid = 1187 then 2003 when base_type.oid = 13479 then 2003 when base_type.oid = 13480 then 2002 when base_type.oid = 13484 then 2003 when base_type.oid = 13485 then 2002 when base_type.oid = 13489 then 2003 when base_type.oid = 13490 then 2002 when base_type.oid = 13494 then 2003 when base_type.oid = 13495 then 2002 when base_type.oid = 13499 then 2003 when base_type.oid = 13500 then 2002 when base_type.oid = 13504 then 2003 when base_type.oid = 13505 then 2002 when base_type.oid = 194 then 1111 when base_type.oid = 13508 then 2003 when base_type.oid = 13509 then 2002 when base_type.oid = 199 then 2003 when base_type.oid = 13512 then 2003 when base_type.oid = 13513 then 2002 when base_type.oid = 2249 then 1111 when base_type.oid = 13516 then 2003 when base_type.oid = 13517 then 2002 when base_type.oid = 1231 then 2003 when base_type.oid = 13520 then 2003 when base_type.oid = 13521 then 2002 when base_type.oid = 210 then 2003 when base_type.oid = 13525 then 2003 when base_type.oid = 13526 then 2002 when base_type.oid = 13529 then 2003 when base_type.oid = 13530 then 2002 when base_type.oid = 13533 then 2003 when base_type.oid = 13534 then 2002 when base_type.oid = 1248 then 2002 when base_type.oid = 13538 then 2003 when base_type.oid = 13539 then 2002 when base_type.oid = 2275 then 1111 when base_type.oid = 2276 then 1111 when base_type.oid = 2277 then 1111 when base_type.oid = 13542 then 2003 when base_type.oid = 2278 then 1111 when base_type.oid = 13543 then 2002 when base_type.oid = 2279 then 1111 when base_type.oid = 2280 then 1111 when base_type.oid = 2281 then 1111 when base_type.oid = 13546 then 2003 when base_type.oid = 13547 then 2002 when base_type.oid = 2283 then 1111 when base_type.oid = 3310 then 1111 when base_type.oid = 13551 then 2003 when base_type.oid = 2287 then 2003 when base_type.oid = 1263 then 2003 when base_type.oid = 13552 then 2002 when base_type.oid = 1266 then 92 when base_type.oid = 13556 then 2003 when base_type.oid = 13557 then 2002 when base_type.oid = 1270 then 2003 when base_type.oid = 269 then 1111 when base_type.oid = 270 then 2003 when base_type.oid = 271 then 2003 when base_type.oid = 272 then 2003 when base_type.oid = 273 then 2003 when base_type.oid = 3361 then 1111 when base_type.oid = 325 then 1111 when base_type.oid = 3402 then 1111 when base_type.oid = 4451 then 1111 when base_type.oid = 3500 then 1111 when base_type.oid = 4532 then 1111 when base_type.oid = 4533 then 1111 when base_type.oid = 4534 then 1111 when base_type.oid = 4535 then 1111 when base_type.oid = 4536 then 1111 when base_type.oid = 4537 then 1111 when base_type.oid = 4538 then 1111 when base_type.oid = 4600 then 1111 when base_type.oid = 4601 then 1111 when base_type.oid = 1560 then -7 when base_type.oid = 1561 then 2003 when base_type.oid = 1562 then 1111 when base_type.oid = 1563 then 2003 when base_type.oid = 3614 then 1111 when base_type.oid = 3615 then 1111 when base_type.oid = 3642 then 1111 when base_type.oid = 3643 then 2003 when base_type.oid = 3644 then 2003 when base_type.oid = 3645 then 2003 when base_type.oid = 600 then 1111 when base_type.oid = 601 then 1111 when base_type.oid = 602 then 1111 when base_type.oid = 603 then 1111 when base_type.oid = 604 then 1111 when base_type.oid = 628 then 1111 when base_type.oid = 629 then 2003 when base_type.oid = 650 then 1111 when base_type.oid = 651 then 2003 when base_type.oid = 3734 then 1111 when base_type.oid = 3735 then 2003 when base_type.oid = 1700 then 2 when base_type.oid = 3769 then 1111 when base_type.oid = 3770 then 2003 when base_type.oid = 700 then 7 when base_type.oid = 701 then 8 when base_type.oid = 705 then 1111 when base_type.oid = 718 then 1111 when base_type.oid = 719 then 2003 when base_type.oid = 2776 then 1111 when base_type.oid = 3802 then 1111 when base_type.oid = 3807 then 2003 when base_type.oid = 12001 then 2003 when base_type.oid = 12002 then 2002 when base_type.oid = 12006 then 2003 when base_type.oid = 12007 then 2002 when base_type.oid = 12011 then 2003 when base_type.oid = 12012 then 2002 when base_type.oid = 12015 then 2003 when base_type.oid = 12016 then 2002 when base_type.oid = 12019 then 2003 when base_type.oid = 12020 then 2002 when base_type.oid = 3831 then 1111 when base_type.oid = 12024 then 2003 when base_type.oid = 12025 then 2002 when base_type.oid = 12029 then 2003 when base_type.oid = 1790 then 2012 when base_type.oid = 12030 then 2002 when base_type.oid = 3838 then 1111 when base_type.oid = 12034 then 2003 when base_type.oid = 12035 then 2002 when base_type.oid = 774 then 1111 when base_type.oid = 12039 then 2003 when base_type.oid = 775 then 2003 when base_type.oid = 12040 then 2002 when base_type.oid = 12044 then 2003 when base_type.oid = 12045 then 2002 when base_type.oid = 10000 then 2003 when base_type.oid = 12049 then 2003 when base_type.oid = 10001 then 2002 when base_type.oid = 12050 then 2002 when base_type.oid = 10002 then 2003 when base_type.oid = 10003 then 2002 when base_type.oid = 10004 then 2003 when base_type.oid = 10005 then 2002 when base_type.oid = 790 then 8 when base_type.oid = 12054 then 2003 when base_type.oid = 10006 then 2003 when base_type.oid = 791 then 2003 when base_type.oid = 12055 then 2002 when base_type.oid = 10007 then 2002 when base_type.oid = 10008 then 2003 when base_type.oid = 10009 then 2002 when base_type.oid = 10010 then 2003 when base_type.oid = 2842 then 2002 when base_type.oid = 12059 then 2003 when base_type.oid = 10011 then 2002 when base_type.oid = 2843 then 2002 when base_type.oid = 12060 then 2002 when base_type.oid = 10012 then 2003 when base_type.oid = 10013 then 2002 when base_type.oid = 10014 then 2003 when base_type.oid = 10015 then 2002 when base_type.oid = 12064 then 2003 when base_type.oid = 10016 then 2003 when base_type.oid = 12065 then 2002 when base_type.oid = 10017 then 2002 when base_type.oid = 10018 then 2003 when base_type.oid = 10019 then 2002 when base_type.oid = 10020 then 2003 when base_type.oid = 12069 then 2003 when base_type.oid = 10021 then 2002 when base_type.oid = 12070 then 2002 when base_type.oid = 10022 then 2003 when base_type.oid = 10023 then 2002 when base_type.oid = 10024 then 2003 when base_type.oid = 10025 then 2002 when base_type.oid = 12074 then 2003 when base_type.oid = 10026 then 2003 when base_type.oid = 12075 then 2002 when base_type.oid = 10027 then 2002 when base_type.oid = 10028 then 2003 when base_type.oid = 10029 then 2002 when base_type.oid = 12078 then 2003 when base_type.oid = 10030 then 2003 when base_type.oid = 12079 then 2002 when base_type.oid = 10031 then 2002 when base_type.oid = 10032 then 2003 when base_type.oid = 10033 then 2002 when base_type.oid = 12082 then 2003 when base_type.oid = 10034 then 2003 when base_type.oid = 12083 then 2002 when base_type.oid = 10035 then 2002 when base_type.oid = 10036 then 2003 when base_type.oid = 10037 then 2002 when base_type.oid = 12086 then 2003 when base_type.oid = 10038 then 2003 when base_type.oid = 12087 then 2002 when base_type.oid = 10039 then 2002 when base_type.oid = 10040 then 2003 when base_type.oid = 10041 then 2002 when base_type.oid = 10042 then 2003 when base_type.oid = 12091 then 2003 when base_type.oid = 10043 then 2002 when base_type.oid = 12092 then 2002 when base_type.oid = 10044 then 2003 when base_type.oid = 10045 then 2002 when base_type.oid = 829 then 1111 when base_type.oid = 10046 then 2003 when base_type.oid = 10047 then 2002 when base_type.oid = 12096 then 2003 when base_type.oid = 10048 then 2003 when base_type.oid = 3904 then 1111 when base_type.oid = 12097 then 2002 when base_type.oid = 10049 then 2002 when base_type.oid = 3905 then 2003 when base_type.oid = 10050 then 2003 when base_type.oid = 3906 then 1111 when base_type.oid = 10051 then 2002 when base_type.oid = 3907 then 2003 when base_type.oid = 12100 then 2003 when base_type.oid = 10052 then 2003 when base_type.oid = 3908 then 1111 when base_type.oid = 12101 then 2002 when base_type.oid = 10053 then 2003 when base_type.oid = 3909 then 2003 when base_type.oid = 10054 then 2002 when base_type.oid = 3910 then 1111 when base_type.oid = 10055 then 2003 when base_type.oid = 3911 then 2003 when base_type.oid = 10056 then 2002 when base_type.oid = 3912 then 1111 when base_type.oid = 12105 then 2003 when base_type.oid = 10057 then 2003 when base_type.oid = 3913 then 2003 when base_type.oid = 12106 then 2002 when base_type.oid = 10058 then 2003 when base_type.oid = 10059 then 2003 when base_type.oid = 10060 then 2002 when base_type.oid = 10061 then 2003 when base_type.oid = 10062 then 2002 when base_type.oid = 12111 then 2003 when base_type.oid = 10063 then 2003 when base_type.oid = 12112 then 2002 when base_type.oid = 10064 then 2002 when base_type.oid = 10065 then 2003 when base_type.oid = 10066 then 2002 when base_type.oid = 12115 then 2003 when base_type.oid = 10067 then 2003 when base_type.oid = 12116 then 2002 when base_type.oid = 10068 then 2002 when base_type.oid = 10069 then 2003 when base_type.oid = 10070 then 2002 when base_type.oid = 3926 then 1111 when base_type.oid = 12119 then 2003 when base_type.oid = 10071 then 2003 when base_type.oid = 3927 then 2003 when base_type.oid = 12120 then 2002 when base_type.oid = 10072 then 2002 when base_type.oid = 10073 then 2003 when base_type.oid = 10074 then 2002 when base_type.oid = 12123 then 2003 when base_type.oid = 10075 then 2003 when base_type.oid = 12124 then 2002 when base_type.oid = 10076 then 2002 when base_type.oid = 10077 then 2003 when base_type.oid = 10078 then 2002 when base_type.oid = 12127 then 2003 when base_type.oid = 10079 then 2003 when base_type.oid = 12128 then 2002 when base_type.oid = 10080 then 2002 when base_type.oid = 10081 then 2003 when base_type.oid = 10082 then 2002 when base_type.oid = 12131 then 2003 when base_type.oid = 10083 then 2003 when base_type.oid = 12132 then 2002 when base_type.oid = 10084 then 2002 when base_type.oid = 869 then 1111 when base_type.oid = 10085 then 2003 when base_type.oid = 10086 then 2002 when base_type.oid = 12135 then 2003 when base_type.oid = 10087 then 2003 when base_type.oid = 12136 then 2002 when base_type.oid = 10088 then 2002 when base_type.oid = 10089 then 2003 when base_type.oid = 10090 then 2002 when base_type.oid = 12139 then 2003 when base_type.oid = 10091 then 2003 when base_type.oid = 12140 then 2002 when base_type.oid = 10092 then 2002 when base_type.oid = 10093 then 2003 when base_type.oid = 10094 then 2003 when base_type.oid = 12143 then 2003 when base_type.oid = 10095 then 2002 when base_type.oid = 12144 then 2002 when base_type.oid = 10096 then 2003 when base_type.oid = 10097 then 2002 when base_type.oid = 10098 then 2003 when base_type.oid = 10099 then 2002 when base_type.oid = 12148 then 2003 when base_type.oid = 10100 then 2003 when base_type.oid = 12149 then 2002 when base_type.oid = 10101 then 2002 when base_type.oid = 10102 then 2003 when base_type.oid = 10103 then 2002 when base_type.oid = 10104 then 2003 when base_type.oid = 12153 then 2003 when base_type.oid = 10105 then 2002 when base_type.oid = 12154 then 2002 when base_type.oid = 10106 then 2003 when base_type.oid = 10107 then 2002 when base_type.oid = 10108 then 2003 when base_type.oid = 10109 then 2002 when base_type.oid = 12158 then 2003 when base_type.oid = 10110 then 2003 when base_type.oid = 12159 then 2002 when base_type.oid = 10111 then 2002 when base_type.oid = 10112 then 2003 when base_type.oid = 10113 then 2003 when base_type.oid = 12162 then 2003 when base_type.oid = 10114 then 2002 when base_type.oid = 12163 then 2002 when base_type.oid = 2949 then 2003 when base_type.oid = 2950 then 1111 when base_type.oid = 2951 then 2003 when base_type.oid = 12167 then 2003 when base_type.oid = 12168 then 2002 when base_type.oid = 12171 then 2003 when base_type.oid = 12172 then 2002 when base_type.oid = 12176 then 2003 when base_type.oid = 12177 then 2002 when base_type.oid = 12180 then 2003 when base_type.oid = 12181 then 2002 when base_type.oid = 12184 then 2003 when base_type.oid = 5017 then 1111 when base_type.oid = 12185 then 2002 when base_type.oid = 2970 then 1111 when base_type.oid = 12189 then 2003 when base_type.oid = 12190 then 2002 when base_type.oid = 12193 then 2003 when base_type.oid = 12194 then 2002 when base_type.oid = 13220 then 2003 when base_type.oid = 13221 then 2001 when base_type.oid = 12197 then 2003 when base_type.oid = 12198 then 2002 when base_type.oid = 13223 then 2003 when base_type.oid = 13224 then 2001 when base_type.oid = 13225 then 2003 when base_type.oid = 13226 then 2001 when base_type.oid = 12202 then 2003 when base_type.oid = 12203 then 2002 when base_type.oid = 13228 then 2003 when base_type.oid = 13229 then 2002 when base_type.oid = 12206 then 2003 when base_type.oid = 5038 then 1111 when base_type.oid = 13231 then 2003 when base_type.oid = 12207 then 2002 when base_type.oid = 5039 then 2003 when base_type.oid = 13232 then 2001 when base_type.oid = 13233 then 2003 when base_type.oid = 13234 then 2001 when base_type.oid = 12210 then 2003 when base_type.oid = 12211 then 2002 when base_type.oid = 13237 then 2003 when base_type.oid = 13238 then 2002 when base_type.oid = 12215 then 2003 when base_type.oid = 12216 then 2002 when base_type.oid = 13242 then 2003 when base_type.oid = 13243 then 2002 when base_type.oid = 12219 then 2003 when base_type.oid = 12220 then 2002 when base_type.oid = 13246 then 2003 when base_type.oid = 13247 then 2002 when base_type.oid = 12223 then 2003 when base_type.oid = 12224 then 2002 when base_type.oid = 13251 then 2003 when base_type.oid = 13252 then 2002 when base_type.oid = 12228 then 2003 when base_type.oid = 12229 then 2002 when base_type.oid = 13256 then 2003 when base_type.oid = 13257 then 2002 when base_type.oid = 12233 then 2003 when base_type.oid = 12234 then 2002 when base_type.oid = 13261 then 2003 when base_type.oid = 12237 then 2003 when base_type.oid = 5069 then 1111 when base_type.oid = 13262 then 2002 when base_type.oid = 12238 then 2002 when base_type.oid = 12241 then 2003 when base_type.oid = 13266 then 2003 when base_type.oid = 12242 then 2002 when base_type.oid = 13267 then 2002 when base_type.oid = 12245 then 2003 when base_type.oid = 6101 then 2002 when base_type.oid = 5077 then 1111 when base_type.oid = 12246 then 2002 when base_type.oid = 5078 then 1111 when base_type.oid = 13271 then 2003 when base_type.oid = 5079 then 1111 when base_type.oid = 13272 then 2002 when base_type.oid = 5080 then 1111 when base_type.oid = 12250 then 2003 when base_type.oid = 12251 then 2002 when base_type.oid = 13276 then 2003 when base_type.oid = 13277 then 2002 when base_type.oid = 12254 then 2003 when base_type.oid = 12255 then 2002 when base_type.oid = 13281 then 2003 when base_type.oid = 13282 then 2002 when base_type.oid = 12258 then 2003 when base_type.oid = 4066 then 2002 when base_type.oid = 12259 then 2002 when base_type.oid = 13286 then 2003 when base_type.oid = 13287 then 2002 when base_type.oid = 12263 then 2003 when base_type.oid = 1000 then 2003 when base_type.oid = 12264 then 2002 when base_type.oid = 4072 then 1111 when base_type.oid = 1001 then 2003 when base_type.oid = 4073 then 2003 when base_type.oid = 1002 then 2003 when base_type.oid = 1003 then 2003 when base_type.oid = 13291 then 2003 when base_type.oid = 12267 then 2003 when base_type.oid = 13292 then 2002 when base_type.oid = 12268 then 2002 when base_type.oid = 1005 then 2003 when base_type.oid = 1006 then 2003 when base_type.oid = 1007 then 2003 when base_type.oid = 13296 then 2003 when base_type.oid = 12272 then 2003 when base_type.oid = 1008 then 2003 when base_type.oid = 1009 then 2003 when base_type.oid = 13297 then 2002 when base_type.oid = 12273 then 2002 when base_type.oid = 1010 then 2003 when base_type.oid = 1011 then 2003 when base_type.oid = 12276 then 2003 when base_type.oid = 1012 then 2003 when base_type.oid = 13301 then 2003 when base_type.oid = 12277 then 2002 when base_type.oid = 1013 then 2003 when base_type.oid = 1014 then 2003 when base_type.oid = 13302 then 2002 when base_type.oid = 1015 then 2003 when base_type.oid = 1016 then 2003 when base_type.oid = 1017 then 2003 when base_type.oid = 12281 then 2003 when base_type.oid = 4089 then 1111 when base_type.oid = 13306 then 2003 when base_type.oid = 12282 then 2002 when base_type.oid = 4090 then 2003 when base_type.oid = 1018 then 2003 when base_type.oid = 13307 then 2002 when base_type.oid = 1019 then 2003 when base_type.oid = 1020 then 2003 when base_type.oid = 1021 then 2003 when base_type.oid = 1022 then 2003 when base_type.oid = 12286 then 2003 when base_type.oid = 13311 then 2003 when base_type.oid = 12287 then 2002 else 1111 end from pg_type base_type where base_type.oid=t.typbasetype) else null end as base_type from pg_catalog.pg_type t, pg_catalog.pg_namespace n where t.typnamespace = n.oid and n.nspname != 'pg_catalog' and n.nspname != 'pg_toast' and t.typtype IN ('c','d')  and t.typname like '%' and n.nspname like 'public' order by data_type, type_schem, type_name
-- ----
SELECT t.typlen FROM pg_catalog.pg_type t, pg_catalog.pg_namespace n WHERE t.typnamespace=n.oid AND t.typname='name' AND n.nspname='pg_catalog'
-- ----
select string_agg(word, ',') from pg_catalog.pg_get_keywords() where word <> ALL ('{a,abs,absolute,action,ada,add,admin,after,all,allocate,alter,always,and,any,are,array,as,asc,asensitive,assertion,assignment,asymmetric,at,atomic,attribute,attributes,authorization,avg,before,begin,bernoulli,between,bigint,binary,blob,boolean,both,breadth,by,c,call,called,cardinality,cascade,cascaded,case,cast,catalog,catalog_name,ceil,ceiling,chain,char,char_length,character,character_length,character_set_catalog,character_set_name,character_set_schema,characteristics,characters,check,checked,class_origin,clob,close,coalesce,cobol,code_units,collate,collation,collation_catalog,collation_name,collation_schema,collect,column,column_name,command_function,command_function_code,commit,committed,condition,condition_number,connect,connection_name,constraint,constraint_catalog,constraint_name,constraint_schema,constraints,constructors,contains,continue,convert,corr,corresponding,count,covar_pop,covar_samp,create,cross,cube,cume_dist,current,current_collation,current_date,current_default_transform_group,current_path,current_role,current_time,current_timestamp,current_transform_group_for_type,current_user,cursor,cursor_name,cycle,data,date,datetime_interval_code,datetime_interval_precision,day,deallocate,dec,decimal,declare,default,defaults,deferrable,deferred,defined,definer,degree,delete,dense_rank,depth,deref,derived,desc,describe,descriptor,deterministic,diagnostics,disconnect,dispatch,distinct,domain,double,drop,dynamic,dynamic_function,dynamic_function_code,each,element,else,end,end-exec,equals,escape,every,except,exception,exclude,excluding,exec,execute,exists,exp,external,extract,false,fetch,filter,final,first,float,floor,following,for,foreign,fortran,found,free,from,full,function,fusion,g,general,get,global,go,goto,grant,granted,group,grouping,having,hierarchy,hold,hour,identity,immediate,implementation,in,including,increment,indicator,initially,inner,inout,input,insensitive,insert,instance,instantiable,int,integer,intersect,intersection,interval,into,invoker,is,isolation,join,k,key,key_member,key_type,language,large,last,lateral,leading,left,length,level,like,ln,local,localtime,localtimestamp,locator,lower,m,map,match,matched,max,maxvalue,member,merge,message_length,message_octet_length,message_text,method,min,minute,minvalue,mod,modifies,module,month,more,multiset,mumps,name,names,national,natural,nchar,nclob,nesting,new,next,no,none,normalize,normalized,not,"null",nullable,nullif,nulls,number,numeric,object,octet_length,octets,of,old,on,only,open,option,options,or,order,ordering,ordinality,others,out,outer,output,over,overlaps,overlay,overriding,pad,parameter,parameter_mode,parameter_name,parameter_ordinal_position,parameter_specific_catalog,parameter_specific_name,parameter_specific_schema,partial,partition,pascal,path,percent_rank,percentile_cont,percentile_disc,placing,pli,position,power,preceding,precision,prepare,preserve,primary,prior,privileges,procedure,public,range,rank,read,reads,real,recursive,ref,references,referencing,regr_avgx,regr_avgy,regr_count,regr_intercept,regr_r2,regr_slope,regr_sxx,regr_sxy,regr_syy,relative,release,repeatable,restart,result,return,returned_cardinality,returned_length,returned_octet_length,returned_sqlstate,returns,revoke,right,role,rollback,rollup,routine,routine_catalog,routine_name,routine_schema,row,row_count,row_number,rows,savepoint,scale,schema,schema_name,scope_catalog,scope_name,scope_schema,scroll,search,second,section,security,select,self,sensitive,sequence,serializable,server_name,session,session_user,set,sets,similar,simple,size,smallint,some,source,space,specific,specific_name,specifictype,sql,sqlexception,sqlstate,sqlwarning,sqrt,start,state,statement,static,stddev_pop,stddev_samp,structure,style,subclass_origin,submultiset,substring,sum,symmetric,system,system_user,table,table_name,tablesample,temporary,then,ties,time,timestamp,timezone_hour,timezone_minute,to,top_level_count,trailing,transaction,transaction_active,transactions_committed,transactions_rolled_back,transform,transforms,translate,translation,treat,trigger,trigger_catalog,trigger_name,trigger_schema,trim,true,type,uescape,unbounded,uncommitted,under,union,unique,unknown,unnamed,unnest,update,upper,usage,user,user_defined_type_catalog,user_defined_type_code,user_defined_type_name,user_defined_type_schema,using,value,values,var_pop,var_samp,varchar,varying,view,when,whenever,where,width_bucket,window,with,within,without,work,write,year,zone}'::text[])
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
	WHERE c.relkind IN ('r','p','v','m','S','f','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
	  CASE c.relpersistence WHEN 'p' THEN 'permanent' WHEN 't' THEN 'temporary' WHEN 'u' THEN 'unlogged' END as "Persistence",
	  am.amname as "Access method",
	  pg_catalog.pg_size_pretty(pg_catalog.pg_table_size(c.oid)) as "Size",
	  pg_catalog.obj_description(c.oid, 'pg_class') as "Description"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
	WHERE c.relkind IN ('r','p','v','m','S','f','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
	WHERE c.relkind IN ('r','p','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
	  CASE c.relpersistence WHEN 'p' THEN 'permanent' WHEN 't' THEN 'temporary' WHEN 'u' THEN 'unlogged' END as "Persistence",
	  am.amname as "Access method",
	  pg_catalog.pg_size_pretty(pg_catalog.pg_table_size(c.oid)) as "Size",
	  pg_catalog.obj_description(c.oid, 'pg_class') as "Description"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
	WHERE c.relkind IN ('r','p','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
	  c2.relname as "Table"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
	     LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
	     LEFT JOIN pg_catalog.pg_class c2 ON i.indrelid = c2.oid
	WHERE c.relkind IN ('i','I','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
	  c2.relname as "Table",
	  CASE c.relpersistence WHEN 'p' THEN 'permanent' WHEN 't' THEN 'temporary' WHEN 'u' THEN 'unlogged' END as "Persistence",
	  am.amname as "Access method",
	  pg_catalog.pg_size_pretty(pg_catalog.pg_table_size(c.oid)) as "Size",
	  pg_catalog.obj_description(c.oid, 'pg_class') as "Description"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
	     LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
	     LEFT JOIN pg_catalog.pg_class c2 ON i.indrelid = c2.oid
	WHERE c.relkind IN ('i','I','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('v','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
	  CASE c.relpersistence WHEN 'p' THEN 'permanent' WHEN 't' THEN 'temporary' WHEN 'u' THEN 'unlogged' END as "Persistence",
	  pg_catalog.pg_size_pretty(pg_catalog.pg_table_size(c.oid)) as "Size",
	  pg_catalog.obj_description(c.oid, 'pg_class') as "Description"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('v','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('S','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
	  CASE c.relpersistence WHEN 'p' THEN 'permanent' WHEN 't' THEN 'temporary' WHEN 'u' THEN 'unlogged' END as "Persistence",
	  pg_catalog.pg_size_pretty(pg_catalog.pg_table_size(c.oid)) as "Size",
	  pg_catalog.obj_description(c.oid, 'pg_class') as "Description"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('S','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
	WHERE c.relkind IN ('m','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('f','')
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1,2;
-- ----
SELECT c.oid,
	  n.nspname,
	  c.relname
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relname OPERATOR(pg_catalog.~) '^(visits)$' COLLATE pg_catalog.default
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 2, 3;
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
	FROM pg_catalog.pg_class c
	 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
	LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
	WHERE c.oid = '16401';
-- ----
SELECT a.attname,
	  pg_catalog.format_type(a.atttypid, a.atttypmod),
	  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
	   FROM pg_catalog.pg_attrdef d
	   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
	  a.attnotnull,
	  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
	   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
	  a.attidentity,
	  a.attgenerated
	FROM pg_catalog.pg_attribute a
	WHERE a.attrelid = '16401' AND a.attnum > 0 AND NOT a.attisdropped
	ORDER BY a.attnum;
-- ----
SELECT c2.relname, i.indisprimary, i.indisunique, i.indisclustered, i.indisvalid, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true),
	  pg_catalog.pg_get_constraintdef(con.oid, true), contype, condeferrable, condeferred, i.indisreplident, c2.reltablespace
	FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i
	  LEFT JOIN pg_catalog.pg_constraint con ON (conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x'))
	WHERE c.oid = '16401' AND c.oid = i.indrelid AND i.indexrelid = c2.oid
	ORDER BY i.indisprimary DESC, c2.relname;
-- ----
SELECT true as sametable, conname,
	  pg_catalog.pg_get_constraintdef(r.oid, true) as condef,
	  conrelid::pg_catalog.regclass AS ontable
	FROM pg_catalog.pg_constraint r
	WHERE r.conrelid = '16401' AND r.contype = 'f'
	     AND conparentid = 0
	ORDER BY conname
-- ----
SELECT conname, conrelid::pg_catalog.regclass AS ontable,
	       pg_catalog.pg_get_constraintdef(oid, true) AS condef
	  FROM pg_catalog.pg_constraint c
	 WHERE confrelid IN (SELECT pg_catalog.pg_partition_ancestors('16401')
	                     UNION ALL VALUES ('16401'::pg_catalog.regclass))
	       AND contype = 'f' AND conparentid = 0
	ORDER BY conname;
-- ----
SELECT pol.polname, pol.polpermissive,
	  CASE WHEN pol.polroles = '{0}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,
	  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),
	  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),
	  CASE pol.polcmd
	    WHEN 'r' THEN 'SELECT'
	    WHEN 'a' THEN 'INSERT'
	    WHEN 'w' THEN 'UPDATE'
	    WHEN 'd' THEN 'DELETE'
	    END AS cmd
	FROM pg_catalog.pg_policy pol
	WHERE pol.polrelid = '16401' ORDER BY 1;
-- ----
SELECT pubname
	     , NULL
	     , NULL
	FROM pg_catalog.pg_publication p
	     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid
	     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid
	WHERE pc.oid ='16401' and pg_catalog.pg_relation_is_publishable('16401')
	UNION
	SELECT pubname
	     , pg_get_expr(pr.prqual, c.oid)
	     , (CASE WHEN pr.prattrs IS NOT NULL THEN
	         (SELECT string_agg(attname, ', ')
	           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,
	                pg_catalog.pg_attribute
	          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])
	        ELSE NULL END) FROM pg_catalog.pg_publication p
	     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid
	     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
	WHERE pr.prrelid = '16401'
	UNION
	SELECT pubname
	     , NULL
	     , NULL
	FROM pg_catalog.pg_publication p
	WHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('16401')
	ORDER BY 1;
-- ----
SELECT t.tgname, pg_catalog.pg_get_triggerdef(t.oid, true), t.tgenabled, t.tgisinternal,
	  CASE WHEN t.tgparentid != 0 THEN
	    (SELECT u.tgrelid::pg_catalog.regclass
	     FROM pg_catalog.pg_trigger AS u,
	          pg_catalog.pg_partition_ancestors(t.tgrelid) WITH ORDINALITY AS a(relid, depth)
	     WHERE u.tgname = t.tgname AND u.tgrelid = a.relid
	           AND u.tgparentid = 0
	     ORDER BY a.depth LIMIT 1)
	  END AS parent
	FROM pg_catalog.pg_trigger t
	WHERE t.tgrelid = '16401' AND (NOT t.tgisinternal OR (t.tgisinternal AND t.tgenabled = 'D'))
	ORDER BY 1;
-- ----
SELECT c.oid::pg_catalog.regclass
	FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
	WHERE c.oid = i.inhparent AND i.inhrelid = '16401'
	  AND c.relkind != 'p' AND c.relkind != 'I'
	ORDER BY inhseqno;
-- ----
SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)
	FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
	WHERE c.oid = i.inhrelid AND i.inhparent = '16401'
	ORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text;
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, pg_catalog.array_to_string(c.reloptions || array(select 'toast.' || x from pg_catalog.unnest(tc.reloptions) x), ', ')
	, c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
	FROM pg_catalog.pg_class c
	 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
	LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
	WHERE c.oid = '16401';
-- ----
SELECT a.attname,
	  pg_catalog.format_type(a.atttypid, a.atttypmod),
	  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
	   FROM pg_catalog.pg_attrdef d
	   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
	  a.attnotnull,
	  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
	   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
	  a.attidentity,
	  a.attgenerated,
	  a.attstorage,
	  a.attcompression AS attcompression,
	  CASE WHEN a.attstattarget=-1 THEN NULL ELSE a.attstattarget END AS attstattarget,
	  pg_catalog.col_description(a.attrelid, a.attnum)
	FROM pg_catalog.pg_attribute a
	WHERE a.attrelid = '16401' AND a.attnum > 0 AND NOT a.attisdropped
	ORDER BY a.attnum;
-- ----
SELECT c.oid,
	  n.nspname,
	  c.relname
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relname OPERATOR(pg_catalog.~) '^(patients)$' COLLATE pg_catalog.default
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 2, 3;
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
	FROM pg_catalog.pg_class c
	 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
	LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
	WHERE c.oid = '16393';
-- ----
SELECT a.attname,
	  pg_catalog.format_type(a.atttypid, a.atttypmod),
	  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
	   FROM pg_catalog.pg_attrdef d
	   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
	  a.attnotnull,
	  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
	   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
	  a.attidentity,
	  a.attgenerated
	FROM pg_catalog.pg_attribute a
	WHERE a.attrelid = '16393' AND a.attnum > 0 AND NOT a.attisdropped
	ORDER BY a.attnum;
-- ----
SELECT c2.relname, i.indisprimary, i.indisunique, i.indisclustered, i.indisvalid, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true),
	  pg_catalog.pg_get_constraintdef(con.oid, true), contype, condeferrable, condeferred, i.indisreplident, c2.reltablespace
	FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i
	  LEFT JOIN pg_catalog.pg_constraint con ON (conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x'))
	WHERE c.oid = '16393' AND c.oid = i.indrelid AND i.indexrelid = c2.oid
	ORDER BY i.indisprimary DESC, c2.relname;
-- ----
SELECT true as sametable, conname,
	  pg_catalog.pg_get_constraintdef(r.oid, true) as condef,
	  conrelid::pg_catalog.regclass AS ontable
	FROM pg_catalog.pg_constraint r
	WHERE r.conrelid = '16393' AND r.contype = 'f'
	     AND conparentid = 0
	ORDER BY conname
-- ----
SELECT conname, conrelid::pg_catalog.regclass AS ontable,
	       pg_catalog.pg_get_constraintdef(oid, true) AS condef
	  FROM pg_catalog.pg_constraint c
	 WHERE confrelid IN (SELECT pg_catalog.pg_partition_ancestors('16393')
	                     UNION ALL VALUES ('16393'::pg_catalog.regclass))
	       AND contype = 'f' AND conparentid = 0
	ORDER BY conname;
-- ----
SELECT pol.polname, pol.polpermissive,
	  CASE WHEN pol.polroles = '{0}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,
	  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),
	  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),
	  CASE pol.polcmd
	    WHEN 'r' THEN 'SELECT'
	    WHEN 'a' THEN 'INSERT'
	    WHEN 'w' THEN 'UPDATE'
	    WHEN 'd' THEN 'DELETE'
	    END AS cmd
	FROM pg_catalog.pg_policy pol
	WHERE pol.polrelid = '16393' ORDER BY 1;
-- ----
SELECT pubname
	     , NULL
	     , NULL
	FROM pg_catalog.pg_publication p
	     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid
	     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid
	WHERE pc.oid ='16393' and pg_catalog.pg_relation_is_publishable('16393')
	UNION
	SELECT pubname
	     , pg_get_expr(pr.prqual, c.oid)
	     , (CASE WHEN pr.prattrs IS NOT NULL THEN
	         (SELECT string_agg(attname, ', ')
	           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,
	                pg_catalog.pg_attribute
	          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])
	        ELSE NULL END) FROM pg_catalog.pg_publication p
	     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid
	     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
	WHERE pr.prrelid = '16393'
	UNION
	SELECT pubname
	     , NULL
	     , NULL
	FROM pg_catalog.pg_publication p
	WHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('16393')
	ORDER BY 1;
-- ----
SELECT t.tgname, pg_catalog.pg_get_triggerdef(t.oid, true), t.tgenabled, t.tgisinternal,
	  CASE WHEN t.tgparentid != 0 THEN
	    (SELECT u.tgrelid::pg_catalog.regclass
	     FROM pg_catalog.pg_trigger AS u,
	          pg_catalog.pg_partition_ancestors(t.tgrelid) WITH ORDINALITY AS a(relid, depth)
	     WHERE u.tgname = t.tgname AND u.tgrelid = a.relid
	           AND u.tgparentid = 0
	     ORDER BY a.depth LIMIT 1)
	  END AS parent
	FROM pg_catalog.pg_trigger t
	WHERE t.tgrelid = '16393' AND (NOT t.tgisinternal OR (t.tgisinternal AND t.tgenabled = 'D'))
	ORDER BY 1;
-- ----
SELECT c.oid::pg_catalog.regclass
	FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
	WHERE c.oid = i.inhparent AND i.inhrelid = '16393'
	  AND c.relkind != 'p' AND c.relkind != 'I'
	ORDER BY inhseqno;
-- ----
SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)
	FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
	WHERE c.oid = i.inhrelid AND i.inhparent = '16393'
	ORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text;
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, pg_catalog.array_to_string(c.reloptions || array(select 'toast.' || x from pg_catalog.unnest(tc.reloptions) x), ', ')
	, c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
	FROM pg_catalog.pg_class c
	 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
	LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
	WHERE c.oid = '16393';
-- ----
SELECT a.attname,
	  pg_catalog.format_type(a.atttypid, a.atttypmod),
	  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
	   FROM pg_catalog.pg_attrdef d
	   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
	  a.attnotnull,
	  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
	   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
	  a.attidentity,
	  a.attgenerated,
	  a.attstorage,
	  a.attcompression AS attcompression,
	  CASE WHEN a.attstattarget=-1 THEN NULL ELSE a.attstattarget END AS attstattarget,
	  pg_catalog.col_description(a.attrelid, a.attnum)
	FROM pg_catalog.pg_attribute a
	WHERE a.attrelid = '16393' AND a.attnum > 0 AND NOT a.attisdropped
	ORDER BY a.attnum;
-- ----
SELECT c.oid,
	  n.nspname,
	  c.relname
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relname OPERATOR(pg_catalog.~) '^(v)$' COLLATE pg_catalog.default
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 2, 3;
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
	FROM pg_catalog.pg_class c
	 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
	LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
	WHERE c.oid = '16413';
-- ----
SELECT a.attname,
	  pg_catalog.format_type(a.atttypid, a.atttypmod),
	  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
	   FROM pg_catalog.pg_attrdef d
	   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
	  a.attnotnull,
	  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
	   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
	  a.attidentity,
	  a.attgenerated
	FROM pg_catalog.pg_attribute a
	WHERE a.attrelid = '16413' AND a.attnum > 0 AND NOT a.attisdropped
	ORDER BY a.attnum;
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, pg_catalog.array_to_string(c.reloptions || array(select 'toast.' || x from pg_catalog.unnest(tc.reloptions) x), ', ')
	, c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
	FROM pg_catalog.pg_class c
	 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
	LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
	WHERE c.oid = '16413';
-- ----
SELECT a.attname,
	  pg_catalog.format_type(a.atttypid, a.atttypmod),
	  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
	   FROM pg_catalog.pg_attrdef d
	   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
	  a.attnotnull,
	  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
	   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
	  a.attidentity,
	  a.attgenerated,
	  a.attstorage,
	  pg_catalog.col_description(a.attrelid, a.attnum)
	FROM pg_catalog.pg_attribute a
	WHERE a.attrelid = '16413' AND a.attnum > 0 AND NOT a.attisdropped
	ORDER BY a.attnum;
-- ----
SELECT pg_catalog.pg_get_viewdef('16413'::pg_catalog.oid, true);
-- ----
SELECT r.rulename, trim(trailing ';' from pg_catalog.pg_get_ruledef(r.oid, true))
	FROM pg_catalog.pg_rewrite r
	WHERE r.ev_class = '16413' AND r.rulename != '_RETURN' ORDER BY 1;
-- ----
SELECT c.oid,
	  n.nspname,
	  c.relname
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relname OPERATOR(pg_catalog.~) '^(s)$' COLLATE pg_catalog.default
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 2, 3;
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
	FROM pg_catalog.pg_class c
	 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
	LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
	WHERE c.oid = '16417';
-- ----
SELECT pg_catalog.format_type(seqtypid, NULL) AS "Type",
	       seqstart AS "Start",
	       seqmin AS "Minimum",
	       seqmax AS "Maximum",
	       seqincrement AS "Increment",
	       CASE WHEN seqcycle THEN 'yes' ELSE 'no' END AS "Cycles?",
	       seqcache AS "Cache"
	FROM pg_catalog.pg_sequence
	WHERE seqrelid = '16417';
-- ----
SELECT pg_catalog.quote_ident(nspname) || '.' ||
	   pg_catalog.quote_ident(relname) || '.' ||
	   pg_catalog.quote_ident(attname),
	   d.deptype
	FROM pg_catalog.pg_class c
	INNER JOIN pg_catalog.pg_depend d ON c.oid=d.refobjid
	INNER JOIN pg_catalog.pg_namespace n ON n.oid=c.relnamespace
	INNER JOIN pg_catalog.pg_attribute a ON (
	 a.attrelid=c.oid AND
	 a.attnum=d.refobjsubid)
	WHERE d.classid='pg_catalog.pg_class'::pg_catalog.regclass
	 AND d.refclassid='pg_catalog.pg_class'::pg_catalog.regclass
	 AND d.objid='16417'
	 AND d.deptype IN ('a', 'i')
-- ----
SELECT c.oid,
	  n.nspname,
	  c.relname
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relname OPERATOR(pg_catalog.~) '^(mv)$' COLLATE pg_catalog.default
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 2, 3;
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
	FROM pg_catalog.pg_class c
	 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
	LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
	WHERE c.oid = '16427';
-- ----
SELECT a.attname,
	  pg_catalog.format_type(a.atttypid, a.atttypmod),
	  (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true)
	   FROM pg_catalog.pg_attrdef d
	   WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum AND a.atthasdef),
	  a.attnotnull,
	  (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type t
	   WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation) AS attcollation,
	  a.attidentity,
	  a.attgenerated
	FROM pg_catalog.pg_attribute a
	WHERE a.attrelid = '16427' AND a.attnum > 0 AND NOT a.attisdropped
	ORDER BY a.attnum;
-- ----
SELECT pol.polname, pol.polpermissive,
	  CASE WHEN pol.polroles = '{0}' THEN NULL ELSE pg_catalog.array_to_string(array(select rolname from pg_catalog.pg_roles where oid = any (pol.polroles) order by 1),',') END,
	  pg_catalog.pg_get_expr(pol.polqual, pol.polrelid),
	  pg_catalog.pg_get_expr(pol.polwithcheck, pol.polrelid),
	  CASE pol.polcmd
	    WHEN 'r' THEN 'SELECT'
	    WHEN 'a' THEN 'INSERT'
	    WHEN 'w' THEN 'UPDATE'
	    WHEN 'd' THEN 'DELETE'
	    END AS cmd
	FROM pg_catalog.pg_policy pol
	WHERE pol.polrelid = '16427' ORDER BY 1;
-- ----
SELECT pubname
	     , NULL
	     , NULL
	FROM pg_catalog.pg_publication p
	     JOIN pg_catalog.pg_publication_namespace pn ON p.oid = pn.pnpubid
	     JOIN pg_catalog.pg_class pc ON pc.relnamespace = pn.pnnspid
	WHERE pc.oid ='16427' and pg_catalog.pg_relation_is_publishable('16427')
	UNION
	SELECT pubname
	     , pg_get_expr(pr.prqual, c.oid)
	     , (CASE WHEN pr.prattrs IS NOT NULL THEN
	         (SELECT string_agg(attname, ', ')
	           FROM pg_catalog.generate_series(0, pg_catalog.array_upper(pr.prattrs::pg_catalog.int2[], 1)) s,
	                pg_catalog.pg_attribute
	          WHERE attrelid = pr.prrelid AND attnum = prattrs[s])
	        ELSE NULL END) FROM pg_catalog.pg_publication p
	     JOIN pg_catalog.pg_publication_rel pr ON p.oid = pr.prpubid
	     JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid
	WHERE pr.prrelid = '16427'
	UNION
	SELECT pubname
	     , NULL
	     , NULL
	FROM pg_catalog.pg_publication p
	WHERE p.puballtables AND pg_catalog.pg_relation_is_publishable('16427')
	ORDER BY 1;
-- ----
SELECT c.oid::pg_catalog.regclass
	FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
	WHERE c.oid = i.inhparent AND i.inhrelid = '16427'
	  AND c.relkind != 'p' AND c.relkind != 'I'
	ORDER BY inhseqno;
-- ----
SELECT c.oid::pg_catalog.regclass, c.relkind, inhdetachpending, pg_catalog.pg_get_expr(c.relpartbound, c.oid)
	FROM pg_catalog.pg_class c, pg_catalog.pg_inherits i
	WHERE c.oid = i.inhrelid AND i.inhparent = '16427'
	ORDER BY pg_catalog.pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT', c.oid::pg_catalog.regclass::pg_catalog.text;
-- ----
SELECT c.oid,
	  n.nspname,
	  c.relname
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relname OPERATOR(pg_catalog.~) '^(visits_pkey)$' COLLATE pg_catalog.default
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 2, 3;
-- ----
SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules, c.relhastriggers, c.relrowsecurity, c.relforcerowsecurity, false AS relhasoids, c.relispartition, '', c.reltablespace, CASE WHEN c.reloftype = 0 THEN '' ELSE c.reloftype::pg_catalog.regtype::pg_catalog.text END, c.relpersistence, c.relreplident, am.amname
	FROM pg_catalog.pg_class c
	 LEFT JOIN pg_catalog.pg_class tc ON (c.reltoastrelid = tc.oid)
	LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)
	WHERE c.oid = '16405';
-- ----
SELECT a.attname,
	  pg_catalog.format_type(a.atttypid, a.atttypmod),
	  CASE WHEN a.attnum <= (SELECT i.indnkeyatts FROM pg_catalog.pg_index i WHERE i.indexrelid = '16405') THEN 'yes' ELSE 'no' END AS is_key,
	  pg_catalog.pg_get_indexdef(a.attrelid, a.attnum, TRUE) AS indexdef
	FROM pg_catalog.pg_attribute a
	WHERE a.attrelid = '16405' AND a.attnum > 0 AND NOT a.attisdropped
	ORDER BY a.attnum;
-- ----
SELECT i.indisunique, i.indisprimary, i.indisclustered, i.indisvalid,
	  (NOT i.indimmediate) AND EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x') AND condeferrable) AS condeferrable,
	  (NOT i.indimmediate) AND EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x') AND condeferred) AS condeferred,
	i.indisreplident,
	i.indnullsnotdistinct,
	  a.amname, c2.relname, pg_catalog.pg_get_expr(i.indpred, i.indrelid, true)
	FROM pg_catalog.pg_index i, pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_am a
	WHERE i.indexrelid = c.oid AND c.oid = '16405' AND c.relam = a.oid
	AND i.indrelid = c2.oid;
-- ----
SELECT n.nspname as "Schema",
	  p.proname as "Name",
	  pg_catalog.pg_get_function_result(p.oid) as "Result data type",
	  pg_catalog.pg_get_function_arguments(p.oid) as "Argument data types",
	 CASE p.prokind
	  WHEN 'a' THEN 'agg'
	  WHEN 'w' THEN 'window'
	  WHEN 'p' THEN 'proc'
	  ELSE 'func'
	 END as "Type"
	FROM pg_catalog.pg_proc p
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
	WHERE pg_catalog.pg_function_is_visible(p.oid)
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	ORDER BY 1, 2, 4;
-- ----
SELECT n.nspname as "Schema",
	  p.proname as "Name",
	  pg_catalog.pg_get_function_result(p.oid) as "Result data type",
	  pg_catalog.pg_get_function_arguments(p.oid) as "Argument data types",
	 CASE p.prokind
	  WHEN 'a' THEN 'agg'
	  WHEN 'w' THEN 'window'
	  WHEN 'p' THEN 'proc'
	  ELSE 'func'
	 END as "Type",
	 CASE
	  WHEN p.provolatile = 'i' THEN 'immutable'
	  WHEN p.provolatile = 's' THEN 'stable'
	  WHEN p.provolatile = 'v' THEN 'volatile'
	 END as "Volatility",
	 CASE
	  WHEN p.proparallel = 'r' THEN 'restricted'
	  WHEN p.proparallel = 's' THEN 'safe'
	  WHEN p.proparallel = 'u' THEN 'unsafe'
	 END as "Parallel",
	 pg_catalog.pg_get_userbyid(p.proowner) as "Owner",
	 CASE WHEN prosecdef THEN 'definer' ELSE 'invoker' END AS "Security",
	 pg_catalog.array_to_string(p.proacl, E'\n') AS "Access privileges",
	 l.lanname as "Language",
	 COALESCE(pg_catalog.pg_get_function_sqlbody(p.oid), p.prosrc) as "Source code",
	 pg_catalog.obj_description(p.oid, 'pg_proc') as "Description"
	FROM pg_catalog.pg_proc p
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
	     LEFT JOIN pg_catalog.pg_language l ON l.oid = p.prolang
	WHERE pg_catalog.pg_function_is_visible(p.oid)
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	ORDER BY 1, 2, 4;
-- ----
SELECT n.nspname as "Schema",
	  p.proname as "Name",
	  pg_catalog.pg_get_function_result(p.oid) as "Result data type",
	  pg_catalog.pg_get_function_arguments(p.oid) as "Argument data types",
	 CASE p.prokind
	  WHEN 'a' THEN 'agg'
	  WHEN 'w' THEN 'window'
	  WHEN 'p' THEN 'proc'
	  ELSE 'func'
	 END as "Type"
	FROM pg_catalog.pg_proc p
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
	WHERE p.proname OPERATOR(pg_catalog.~) '^(f)$' COLLATE pg_catalog.default
	  AND pg_catalog.pg_function_is_visible(p.oid)
	ORDER BY 1, 2, 4;
-- ----
SELECT n.nspname as "Schema",
	  p.proname as "Name",
	  pg_catalog.pg_get_function_result(p.oid) as "Result data type",
	  pg_catalog.pg_get_function_arguments(p.oid) as "Argument data types",
	 CASE p.prokind
	  WHEN 'a' THEN 'agg'
	  WHEN 'w' THEN 'window'
	  WHEN 'p' THEN 'proc'
	  ELSE 'func'
	 END as "Type"
	FROM pg_catalog.pg_proc p
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
	WHERE (
	       p.prokind = 'a'
	      )
	  AND pg_catalog.pg_function_is_visible(p.oid)
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	ORDER BY 1, 2, 4;
-- ----
SELECT n.nspname as "Schema",
	  pg_catalog.format_type(t.oid, NULL) AS "Name",
	  pg_catalog.obj_description(t.oid, 'pg_type') as "Description"
	FROM pg_catalog.pg_type t
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
	WHERE (t.typrelid = 0 OR (SELECT c.relkind = 'c' FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid))
	  AND NOT EXISTS(SELECT 1 FROM pg_catalog.pg_type el WHERE el.oid = t.typelem AND el.typarray = t.oid)
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_type_is_visible(t.oid)
	ORDER BY 1, 2;
-- ----
SELECT n.nspname as "Schema",
	  pg_catalog.format_type(t.oid, NULL) AS "Name",
	  t.typname AS "Internal name",
	  CASE WHEN t.typrelid != 0
	      THEN CAST('tuple' AS pg_catalog.text)
	    WHEN t.typlen < 0
	      THEN CAST('var' AS pg_catalog.text)
	    ELSE CAST(t.typlen AS pg_catalog.text)
	  END AS "Size",
	  pg_catalog.array_to_string(
	      ARRAY(
	          SELECT e.enumlabel
	          FROM pg_catalog.pg_enum e
	          WHERE e.enumtypid = t.oid
	          ORDER BY e.enumsortorder
	      ),
	      E'\n'
	  ) AS "Elements",
	  pg_catalog.pg_get_userbyid(t.typowner) AS "Owner",
	pg_catalog.array_to_string(t.typacl, E'\n') AS "Access privileges",
	    pg_catalog.obj_description(t.oid, 'pg_type') as "Description"
	FROM pg_catalog.pg_type t
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
	WHERE (t.typrelid = 0 OR (SELECT c.relkind = 'c' FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid))
	  AND NOT EXISTS(SELECT 1 FROM pg_catalog.pg_type el WHERE el.oid = t.typelem AND el.typarray = t.oid)
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_type_is_visible(t.oid)
	ORDER BY 1, 2;
-- ----
SELECT n.nspname as "Schema",
	  pg_catalog.format_type(t.oid, NULL) AS "Name",
	  pg_catalog.obj_description(t.oid, 'pg_type') as "Description"
	FROM pg_catalog.pg_type t
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
	WHERE (t.typrelid = 0 OR (SELECT c.relkind = 'c' FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid))
	  AND NOT EXISTS(SELECT 1 FROM pg_catalog.pg_type el WHERE el.oid = t.typelem AND el.typarray = t.oid)
	  AND (t.typname OPERATOR(pg_catalog.~) '^(mood)$' COLLATE pg_catalog.default
	        OR pg_catalog.format_type(t.oid, NULL) OPERATOR(pg_catalog.~) '^(mood)$' COLLATE pg_catalog.default)
	  AND pg_catalog.pg_type_is_visible(t.oid)
	ORDER BY 1, 2;
-- ----
SELECT n.nspname as "Schema",
	       t.typname as "Name",
	       pg_catalog.format_type(t.typbasetype, t.typtypmod) as "Type",
	       (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type bt
	        WHERE c.oid = t.typcollation AND bt.oid = t.typbasetype AND t.typcollation <> bt.typcollation) as "Collation",
	       CASE WHEN t.typnotnull THEN 'not null' END as "Nullable",
	       t.typdefault as "Default",
	       pg_catalog.array_to_string(ARRAY(
	         SELECT pg_catalog.pg_get_constraintdef(r.oid, true) FROM pg_catalog.pg_constraint r WHERE t.oid = r.contypid
	       ), ' ') as "Check"
	FROM pg_catalog.pg_type t
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
	WHERE t.typtype = 'd'
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_type_is_visible(t.oid)
	ORDER BY 1, 2;
-- ----
SELECT n.nspname as "Schema",
	       t.typname as "Name",
	       pg_catalog.format_type(t.typbasetype, t.typtypmod) as "Type",
	       (SELECT c.collname FROM pg_catalog.pg_collation c, pg_catalog.pg_type bt
	        WHERE c.oid = t.typcollation AND bt.oid = t.typbasetype AND t.typcollation <> bt.typcollation) as "Collation",
	       CASE WHEN t.typnotnull THEN 'not null' END as "Nullable",
	       t.typdefault as "Default",
	       pg_catalog.array_to_string(ARRAY(
	         SELECT pg_catalog.pg_get_constraintdef(r.oid, true) FROM pg_catalog.pg_constraint r WHERE t.oid = r.contypid
	       ), ' ') as "Check",
	  pg_catalog.array_to_string(t.typacl, E'\n') AS "Access privileges",
	       d.description as "Description"
	FROM pg_catalog.pg_type t
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
	     LEFT JOIN pg_catalog.pg_description d ON d.classoid = t.tableoid AND d.objoid = t.oid AND d.objsubid = 0
	WHERE t.typtype = 'd'
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_type_is_visible(t.oid)
	ORDER BY 1, 2;
-- ----
SELECT n.nspname AS "Name",
	  pg_catalog.pg_get_userbyid(n.nspowner) AS "Owner"
	FROM pg_catalog.pg_namespace n
	WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
	ORDER BY 1;
-- ----
SELECT n.nspname AS "Name",
	  pg_catalog.pg_get_userbyid(n.nspowner) AS "Owner",
	  pg_catalog.array_to_string(n.nspacl, E'\n') AS "Access privileges",
	  pg_catalog.obj_description(n.oid, 'pg_namespace') AS "Description"
	FROM pg_catalog.pg_namespace n
	WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'
	ORDER BY 1;
-- ----
SELECT r.rolname, r.rolsuper, r.rolinherit,
	  r.rolcreaterole, r.rolcreatedb, r.rolcanlogin,
	  r.rolconnlimit, r.rolvaliduntil,
	  ARRAY(SELECT b.rolname
	        FROM pg_catalog.pg_auth_members m
	        JOIN pg_catalog.pg_roles b ON (m.roleid = b.oid)
	        WHERE m.member = r.oid) as memberof
	, r.rolreplication
	, r.rolbypassrls
	FROM pg_catalog.pg_roles r
	WHERE r.rolname !~ '^pg_'
	ORDER BY 1;
-- ----
SELECT r.rolname, r.rolsuper, r.rolinherit,
	  r.rolcreaterole, r.rolcreatedb, r.rolcanlogin,
	  r.rolconnlimit, r.rolvaliduntil,
	  ARRAY(SELECT b.rolname
	        FROM pg_catalog.pg_auth_members m
	        JOIN pg_catalog.pg_roles b ON (m.roleid = b.oid)
	        WHERE m.member = r.oid) as memberof
	, pg_catalog.shobj_description(r.oid, 'pg_authid') AS description
	, r.rolreplication
	, r.rolbypassrls
	FROM pg_catalog.pg_roles r
	WHERE r.rolname !~ '^pg_'
	ORDER BY 1;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' END as "Type",
	  pg_catalog.array_to_string(c.relacl, E'\n') AS "Access privileges",
	  pg_catalog.array_to_string(ARRAY(
	    SELECT attname || E':\n  ' || pg_catalog.array_to_string(attacl, E'\n  ')
	    FROM pg_catalog.pg_attribute a
	    WHERE attrelid = c.oid AND NOT attisdropped AND attacl IS NOT NULL
	  ), E'\n') AS "Column privileges",
	  pg_catalog.array_to_string(ARRAY(
	    SELECT polname
	    || CASE WHEN NOT polpermissive THEN
	       E' (RESTRICTIVE)'
	       ELSE '' END
	    || CASE WHEN polcmd != '*' THEN
	           E' (' || polcmd::pg_catalog.text || E'):'
	       ELSE E':'
	       END
	    || CASE WHEN polqual IS NOT NULL THEN
	           E'\n  (u): ' || pg_catalog.pg_get_expr(polqual, polrelid)
	       ELSE E''
	       END
	    || CASE WHEN polwithcheck IS NOT NULL THEN
	           E'\n  (c): ' || pg_catalog.pg_get_expr(polwithcheck, polrelid)
	       ELSE E''
	       END    || CASE WHEN polroles <> '{0}' THEN
	           E'\n  to: ' || pg_catalog.array_to_string(
	               ARRAY(
	                   SELECT rolname
	                   FROM pg_catalog.pg_roles
	                   WHERE oid = ANY (polroles)
	                   ORDER BY 1
	               ), E', ')
	       ELSE E''
	       END
	    FROM pg_catalog.pg_policy pol
	    WHERE polrelid = c.oid), E'\n')
	    AS "Policies"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('r','v','m','S','f','p')
	  AND n.nspname !~ '^pg_' AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1, 2;
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' END as "Type",
	  pg_catalog.array_to_string(c.relacl, E'\n') AS "Access privileges",
	  pg_catalog.array_to_string(ARRAY(
	    SELECT attname || E':\n  ' || pg_catalog.array_to_string(attacl, E'\n  ')
	    FROM pg_catalog.pg_attribute a
	    WHERE attrelid = c.oid AND NOT attisdropped AND attacl IS NOT NULL
	  ), E'\n') AS "Column privileges",
	  pg_catalog.array_to_string(ARRAY(
	    SELECT polname
	    || CASE WHEN NOT polpermissive THEN
	       E' (RESTRICTIVE)'
	       ELSE '' END
	    || CASE WHEN polcmd != '*' THEN
	           E' (' || polcmd::pg_catalog.text || E'):'
	       ELSE E':'
	       END
	    || CASE WHEN polqual IS NOT NULL THEN
	           E'\n  (u): ' || pg_catalog.pg_get_expr(polqual, polrelid)
	       ELSE E''
	       END
	    || CASE WHEN polwithcheck IS NOT NULL THEN
	           E'\n  (c): ' || pg_catalog.pg_get_expr(polwithcheck, polrelid)
	       ELSE E''
	       END    || CASE WHEN polroles <> '{0}' THEN
	           E'\n  to: ' || pg_catalog.array_to_string(
	               ARRAY(
	                   SELECT rolname
	                   FROM pg_catalog.pg_roles
	                   WHERE oid = ANY (polroles)
	                   ORDER BY 1
	               ), E', ')
	       ELSE E''
	       END
	    FROM pg_catalog.pg_policy pol
	    WHERE polrelid = c.oid), E'\n')
	    AS "Policies"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE c.relkind IN ('r','v','m','S','f','p')
	  AND c.relname OPERATOR(pg_catalog.~) '^(visits)$' COLLATE pg_catalog.default
	  AND n.nspname !~ '^pg_' AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1, 2;
-- ----
SELECT pg_catalog.pg_get_userbyid(d.defaclrole) AS "Owner",
	  n.nspname AS "Schema",
	  CASE d.defaclobjtype WHEN 'r' THEN 'table' WHEN 'S' THEN 'sequence' WHEN 'f' THEN 'function' WHEN 'T' THEN 'type' WHEN 'n' THEN 'schema' END AS "Type",
	  pg_catalog.array_to_string(d.defaclacl, E'\n') AS "Access privileges"
	FROM pg_catalog.pg_default_acl d
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = d.defaclnamespace
	ORDER BY 1, 2, 3;
-- ----
SELECT e.extname AS "Name", e.extversion AS "Version", n.nspname AS "Schema", c.description AS "Description"
	FROM pg_catalog.pg_extension e LEFT JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace LEFT JOIN pg_catalog.pg_description c ON c.objoid = e.oid AND c.classoid = 'pg_catalog.pg_extension'::pg_catalog.regclass
	ORDER BY 1;
-- ----
SELECT e.extname, e.oid
	FROM pg_catalog.pg_extension e
	ORDER BY 1;
-- ----
SELECT pg_catalog.pg_describe_object(classid, objid, 0) AS "Object description"
	FROM pg_catalog.pg_depend
	WHERE refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND refobjid = '13559' AND deptype = 'e'
	ORDER BY 1;
-- ----
SELECT evtname as "Name", evtevent as "Event", pg_catalog.pg_get_userbyid(e.evtowner) as "Owner",
	 case evtenabled when 'O' then 'enabled'  when 'R' then 'replica'  when 'A' then 'always'  when 'D' then 'disabled' end as "Enabled",
	 e.evtfoid::pg_catalog.regproc as "Function", pg_catalog.array_to_string(array(select x from pg_catalog.unnest(evttags) as t(x)), ', ') as "Tags"
	FROM pg_catalog.pg_event_trigger e ORDER BY 1
-- ----
SELECT l.lanname AS "Name",
	       pg_catalog.pg_get_userbyid(l.lanowner) as "Owner",
	       l.lanpltrusted AS "Trusted",
	       d.description AS "Description"
	FROM pg_catalog.pg_language l
	LEFT JOIN pg_catalog.pg_description d
	  ON d.classoid = l.tableoid AND d.objoid = l.oid
	  AND d.objsubid = 0
	WHERE l.lanplcallfoid != 0
	ORDER BY 1;
-- ----
SELECT n.nspname AS "Schema",
	       c.conname AS "Name",
	       pg_catalog.pg_encoding_to_char(c.conforencoding) AS "Source",
	       pg_catalog.pg_encoding_to_char(c.contoencoding) AS "Destination",
	       CASE WHEN c.condefault THEN 'yes'
	       ELSE 'no' END AS "Default?"
	FROM pg_catalog.pg_conversion c
	     JOIN pg_catalog.pg_namespace n ON n.oid = c.connamespace
	WHERE true
	  AND n.nspname <> 'pg_catalog'
	  AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_conversion_is_visible(c.oid)
	ORDER BY 1, 2;
-- ----
SELECT pg_catalog.format_type(castsource, NULL) AS "Source type",
	       pg_catalog.format_type(casttarget, NULL) AS "Target type",
	       CASE WHEN c.castmethod = 'b' THEN '(binary coercible)'
	            WHEN c.castmethod = 'i' THEN '(with inout)'
	            ELSE p.proname
	       END AS "Function",
	       CASE WHEN c.castcontext = 'e' THEN 'no'
	            WHEN c.castcontext = 'a' THEN 'in assignment'
	            ELSE 'yes'
	       END AS "Implicit?"
	FROM pg_catalog.pg_cast c LEFT JOIN pg_catalog.pg_proc p
	     ON c.castfunc = p.oid
	     LEFT JOIN pg_catalog.pg_type ts
	     ON c.castsource = ts.oid
	     LEFT JOIN pg_catalog.pg_namespace ns
	     ON ns.oid = ts.typnamespace
	     LEFT JOIN pg_catalog.pg_type tt
	     ON c.casttarget = tt.oid
	     LEFT JOIN pg_catalog.pg_namespace nt
	     ON nt.oid = tt.typnamespace
	WHERE ( (true  AND pg_catalog.pg_type_is_visible(ts.oid)
	) OR (true  AND pg_catalog.pg_type_is_visible(tt.oid)
	) )
	ORDER BY 1, 2;
-- ----
SELECT pg_catalog.format_type(castsource, NULL) AS "Source type",
	       pg_catalog.format_type(casttarget, NULL) AS "Target type",
	       CASE WHEN c.castmethod = 'b' THEN '(binary coercible)'
	            WHEN c.castmethod = 'i' THEN '(with inout)'
	            ELSE p.proname
	       END AS "Function",
	       CASE WHEN c.castcontext = 'e' THEN 'no'
	            WHEN c.castcontext = 'a' THEN 'in assignment'
	            ELSE 'yes'
	       END AS "Implicit?",
	       d.description AS "Description"
	FROM pg_catalog.pg_cast c LEFT JOIN pg_catalog.pg_proc p
	     ON c.castfunc = p.oid
	     LEFT JOIN pg_catalog.pg_type ts
	     ON c.castsource = ts.oid
	     LEFT JOIN pg_catalog.pg_namespace ns
	     ON ns.oid = ts.typnamespace
	     LEFT JOIN pg_catalog.pg_type tt
	     ON c.casttarget = tt.oid
	     LEFT JOIN pg_catalog.pg_namespace nt
	     ON nt.oid = tt.typnamespace
	     LEFT JOIN pg_catalog.pg_description d
	     ON d.classoid = c.tableoid AND d.objoid = c.oid AND d.objsubid = 0
	WHERE ( (true  AND pg_catalog.pg_type_is_visible(ts.oid)
	) OR (true  AND pg_catalog.pg_type_is_visible(tt.oid)
	) )
	ORDER BY 1, 2;
-- ----
SELECT DISTINCT tt.nspname AS "Schema", tt.name AS "Name", tt.object AS "Object", d.description AS "Description"
	FROM (
	  SELECT pgc.oid as oid, pgc.tableoid AS tableoid,
	  n.nspname as nspname,
	  CAST(pgc.conname AS pg_catalog.text) as name,  CAST('table constraint' AS pg_catalog.text) as object
	  FROM pg_catalog.pg_constraint pgc
	    JOIN pg_catalog.pg_class c ON c.oid = pgc.conrelid
	    LEFT JOIN pg_catalog.pg_namespace n     ON n.oid = c.relnamespace
	WHERE n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	UNION ALL
	  SELECT pgc.oid as oid, pgc.tableoid AS tableoid,
	  n.nspname as nspname,
	  CAST(pgc.conname AS pg_catalog.text) as name,  CAST('domain constraint' AS pg_catalog.text) as object
	  FROM pg_catalog.pg_constraint pgc
	    JOIN pg_catalog.pg_type t ON t.oid = pgc.contypid
	    LEFT JOIN pg_catalog.pg_namespace n     ON n.oid = t.typnamespace
	WHERE n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_type_is_visible(t.oid)
	UNION ALL
	  SELECT o.oid as oid, o.tableoid as tableoid,
	  n.nspname as nspname,
	  CAST(o.opcname AS pg_catalog.text) as name,
	  CAST('operator class' AS pg_catalog.text) as object
	  FROM pg_catalog.pg_opclass o
	    JOIN pg_catalog.pg_am am ON o.opcmethod = am.oid
	    JOIN pg_catalog.pg_namespace n ON n.oid = o.opcnamespace
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_opclass_is_visible(o.oid)
	UNION ALL
	  SELECT opf.oid as oid, opf.tableoid as tableoid,
	  n.nspname as nspname,
	  CAST(opf.opfname AS pg_catalog.text) AS name,
	  CAST('operator family' AS pg_catalog.text) as object
	  FROM pg_catalog.pg_opfamily opf
	    JOIN pg_catalog.pg_am am ON opf.opfmethod = am.oid
	    JOIN pg_catalog.pg_namespace n ON opf.opfnamespace = n.oid
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_opfamily_is_visible(opf.oid)
	UNION ALL
	  SELECT r.oid as oid, r.tableoid as tableoid,
	  n.nspname as nspname,
	  CAST(r.rulename AS pg_catalog.text) as name,  CAST('rule' AS pg_catalog.text) as object
	  FROM pg_catalog.pg_rewrite r
	       JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
	       LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	  WHERE r.rulename != '_RETURN'
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	UNION ALL
	  SELECT t.oid as oid, t.tableoid as tableoid,
	  n.nspname as nspname,
	  CAST(t.tgname AS pg_catalog.text) as name,  CAST('trigger' AS pg_catalog.text) as object
	  FROM pg_catalog.pg_trigger t
	       JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
	       LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	) AS tt
	  JOIN pg_catalog.pg_description d ON (tt.oid = d.objoid AND tt.tableoid = d.classoid AND d.objsubid = 0)
	ORDER BY 1, 2, 3;
-- ----
SELECT
	   n.nspname as "Schema",
	   c.cfgname as "Name",
	   pg_catalog.obj_description(c.oid, 'pg_ts_config') as "Description"
	FROM pg_catalog.pg_ts_config c
	LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.cfgnamespace
	WHERE pg_catalog.pg_ts_config_is_visible(c.oid)
	ORDER BY 1, 2;
-- ----
SELECT c.oid, c.cfgname,
	   n.nspname,
	   p.prsname,
	   np.nspname as pnspname
	FROM pg_catalog.pg_ts_config c
	   LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.cfgnamespace,
	 pg_catalog.pg_ts_parser p
	   LEFT JOIN pg_catalog.pg_namespace np ON np.oid = p.prsnamespace
	WHERE  p.oid = c.cfgparser
	  AND pg_catalog.pg_ts_config_is_visible(c.oid)
	ORDER BY 3, 2;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13152' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13154' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13156' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13158' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13160' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13162' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13164' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13166' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13168' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13170' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13172' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13174' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13176' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13178' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13180' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13182' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13184' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13186' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13188' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13190' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13192' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13194' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13196' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '3748' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13198' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13200' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13202' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13204' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  ( SELECT t.alias FROM
	    pg_catalog.ts_token_type(c.cfgparser) AS t
	    WHERE t.tokid = m.maptokentype ) AS "Token",
	  pg_catalog.btrim(
	    ARRAY( SELECT mm.mapdict::pg_catalog.regdictionary
	           FROM pg_catalog.pg_ts_config_map AS mm
	           WHERE mm.mapcfg = m.mapcfg AND mm.maptokentype = m.maptokentype
	           ORDER BY mapcfg, maptokentype, mapseqno
	    ) :: pg_catalog.text,
	  '{}') AS "Dictionaries"
	FROM pg_catalog.pg_ts_config AS c, pg_catalog.pg_ts_config_map AS m
	WHERE c.oid = '13206' AND m.mapcfg = c.oid
	GROUP BY m.mapcfg, m.maptokentype, c.cfgparser
	ORDER BY 1;
-- ----
SELECT
	  n.nspname as "Schema",
	  d.dictname as "Name",
	  pg_catalog.obj_description(d.oid, 'pg_ts_dict') as "Description"
	FROM pg_catalog.pg_ts_dict d
	LEFT JOIN pg_catalog.pg_namespace n ON n.oid = d.dictnamespace
	WHERE pg_catalog.pg_ts_dict_is_visible(d.oid)
	ORDER BY 1, 2;
-- ----
SELECT
	  n.nspname as "Schema",
	  p.prsname as "Name",
	  pg_catalog.obj_description(p.oid, 'pg_ts_parser') as "Description"
	FROM pg_catalog.pg_ts_parser p
	LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.prsnamespace
	WHERE pg_catalog.pg_ts_parser_is_visible(p.oid)
	ORDER BY 1, 2;
-- ----
SELECT p.oid,
	  n.nspname,
	  p.prsname
	FROM pg_catalog.pg_ts_parser p
	LEFT JOIN pg_catalog.pg_namespace n ON n.oid = p.prsnamespace
	WHERE pg_catalog.pg_ts_parser_is_visible(p.oid)
	ORDER BY 1, 2;
-- ----
SELECT 'Start parse' AS "Method",
	   p.prsstart::pg_catalog.regproc AS "Function",
	   pg_catalog.obj_description(p.prsstart, 'pg_proc') as "Description"
	 FROM pg_catalog.pg_ts_parser p
	 WHERE p.oid = '3722'
	UNION ALL
	SELECT 'Get next token',
	   p.prstoken::pg_catalog.regproc,
	   pg_catalog.obj_description(p.prstoken, 'pg_proc')
	 FROM pg_catalog.pg_ts_parser p
	 WHERE p.oid = '3722'
	UNION ALL
	SELECT 'End parse',
	   p.prsend::pg_catalog.regproc,
	   pg_catalog.obj_description(p.prsend, 'pg_proc')
	 FROM pg_catalog.pg_ts_parser p
	 WHERE p.oid = '3722'
	UNION ALL
	SELECT 'Get headline',
	   p.prsheadline::pg_catalog.regproc,
	   pg_catalog.obj_description(p.prsheadline, 'pg_proc')
	 FROM pg_catalog.pg_ts_parser p
	 WHERE p.oid = '3722'
	UNION ALL
	SELECT 'Get token types',
	   p.prslextype::pg_catalog.regproc,
	   pg_catalog.obj_description(p.prslextype, 'pg_proc')
	 FROM pg_catalog.pg_ts_parser p
	 WHERE p.oid = '3722';
-- ----
SELECT t.alias as "Token name",
	  t.description as "Description"
	FROM pg_catalog.ts_token_type( '3722'::pg_catalog.oid ) as t
	ORDER BY 1;
-- ----
SELECT
	  n.nspname AS "Schema",
	  t.tmplname AS "Name",
	  pg_catalog.obj_description(t.oid, 'pg_ts_template') AS "Description"
	FROM pg_catalog.pg_ts_template t
	LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.tmplnamespace
	WHERE pg_catalog.pg_ts_template_is_visible(t.oid)
	ORDER BY 1, 2;
-- ----
SELECT amname AS "Name",
	  CASE amtype WHEN 'i' THEN 'Index' WHEN 't' THEN 'Table' END AS "Type"
	FROM pg_catalog.pg_am
	ORDER BY 1;
-- ----
SELECT amname AS "Name",
	  CASE amtype WHEN 'i' THEN 'Index' WHEN 't' THEN 'Table' END AS "Type",
	  amhandler AS "Handler",
	  pg_catalog.obj_description(oid, 'pg_am') AS "Description"
	FROM pg_catalog.pg_am
	ORDER BY 1;
-- ----
SELECT
	  am.amname AS "AM",
	  pg_catalog.format_type(c.opcintype, NULL) AS "Input type",
	  CASE
	    WHEN c.opckeytype <> 0 AND c.opckeytype <> c.opcintype
	    THEN pg_catalog.format_type(c.opckeytype, NULL)
	    ELSE NULL
	  END AS "Storage type",
	  CASE
	    WHEN pg_catalog.pg_opclass_is_visible(c.oid)
	    THEN pg_catalog.format('%I', c.opcname)
	    ELSE pg_catalog.format('%I.%I', n.nspname, c.opcname)
	  END AS "Operator class",
	  (CASE WHEN c.opcdefault
	    THEN 'yes'
	    ELSE 'no'
	  END) AS "Default?"
	FROM pg_catalog.pg_opclass c
	  LEFT JOIN pg_catalog.pg_am am on am.oid = c.opcmethod
	  LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.opcnamespace
	  LEFT JOIN pg_catalog.pg_type t ON t.oid = c.opcintype
	  LEFT JOIN pg_catalog.pg_namespace tn ON tn.oid = t.typnamespace
	ORDER BY 1, 2, 4;
-- ----
SELECT
	  am.amname AS "AM",
	  CASE
	    WHEN pg_catalog.pg_opfamily_is_visible(f.oid)
	    THEN pg_catalog.format('%I', f.opfname)
	    ELSE pg_catalog.format('%I.%I', n.nspname, f.opfname)
	  END AS "Operator family",
	  (SELECT
	     pg_catalog.string_agg(pg_catalog.format_type(oc.opcintype, NULL), ', ')
	   FROM pg_catalog.pg_opclass oc
	   WHERE oc.opcfamily = f.oid) "Applicable types"
	FROM pg_catalog.pg_opfamily f
	  LEFT JOIN pg_catalog.pg_am am on am.oid = f.opfmethod
	  LEFT JOIN pg_catalog.pg_namespace n ON n.oid = f.opfnamespace
	ORDER BY 1, 2;
-- ----
SELECT
	  am.amname AS "AM",
	  CASE
	    WHEN pg_catalog.pg_opfamily_is_visible(of.oid)
	    THEN pg_catalog.format('%I', of.opfname)
	    ELSE pg_catalog.format('%I.%I', nsf.nspname, of.opfname)
	  END AS "Operator family",
	  o.amopopr::pg_catalog.regoperator AS "Operator"
	,  o.amopstrategy AS "Strategy",
	  CASE o.amoppurpose
	    WHEN 'o' THEN 'ordering'
	    WHEN 's' THEN 'search'
	  END AS "Purpose"
	FROM pg_catalog.pg_amop o
	  LEFT JOIN pg_catalog.pg_opfamily of ON of.oid = o.amopfamily
	  LEFT JOIN pg_catalog.pg_am am ON am.oid = of.opfmethod AND am.oid = o.amopmethod
	  LEFT JOIN pg_catalog.pg_namespace nsf ON of.opfnamespace = nsf.oid
	ORDER BY 1, 2,
	  o.amoplefttype = o.amoprighttype DESC,
	  pg_catalog.format_type(o.amoplefttype, NULL),
	  pg_catalog.format_type(o.amoprighttype, NULL),
	  o.amopstrategy;
-- ----
SELECT
	  am.amname AS "AM",
	  CASE
	    WHEN pg_catalog.pg_opfamily_is_visible(of.oid)
	    THEN pg_catalog.format('%I', of.opfname)
	    ELSE pg_catalog.format('%I.%I', ns.nspname, of.opfname)
	  END AS "Operator family",
	  pg_catalog.format_type(ap.amproclefttype, NULL) AS "Registered left type",
	  pg_catalog.format_type(ap.amprocrighttype, NULL) AS "Registered right type",
	  ap.amprocnum AS "Number"
	, p.proname AS "Function"
	FROM pg_catalog.pg_amproc ap
	  LEFT JOIN pg_catalog.pg_opfamily of ON of.oid = ap.amprocfamily
	  LEFT JOIN pg_catalog.pg_am am ON am.oid = of.opfmethod
	  LEFT JOIN pg_catalog.pg_namespace ns ON of.opfnamespace = ns.oid
	  LEFT JOIN pg_catalog.pg_proc p ON ap.amproc = p.oid
	ORDER BY 1, 2,
	  ap.amproclefttype = ap.amprocrighttype DESC,
	  3, 4, 5;
-- ----
SELECT spcname AS "Name",
	  pg_catalog.pg_get_userbyid(spcowner) AS "Owner",
	  pg_catalog.pg_tablespace_location(oid) AS "Location"
	FROM pg_catalog.pg_tablespace
	ORDER BY 1;
-- ----
SELECT spcname AS "Name",
	  pg_catalog.pg_get_userbyid(spcowner) AS "Owner",
	  pg_catalog.pg_tablespace_location(oid) AS "Location",
	  pg_catalog.array_to_string(spcacl, E'\n') AS "Access privileges",
	  spcoptions AS "Options",
	  pg_catalog.pg_size_pretty(pg_catalog.pg_tablespace_size(oid)) AS "Size",
	  pg_catalog.shobj_description(oid, 'pg_tablespace') AS "Description"
	FROM pg_catalog.pg_tablespace
	ORDER BY 1;
-- ----
SELECT s.srvname AS "Name",
	  pg_catalog.pg_get_userbyid(s.srvowner) AS "Owner",
	  f.fdwname AS "Foreign-data wrapper"
	FROM pg_catalog.pg_foreign_server s
	     JOIN pg_catalog.pg_foreign_data_wrapper f ON f.oid=s.srvfdw
	ORDER BY 1;
-- ----
SELECT fdw.fdwname AS "Name",
	  pg_catalog.pg_get_userbyid(fdw.fdwowner) AS "Owner",
	  fdw.fdwhandler::pg_catalog.regproc AS "Handler",
	  fdw.fdwvalidator::pg_catalog.regproc AS "Validator"
	FROM pg_catalog.pg_foreign_data_wrapper fdw
	ORDER BY 1;
-- ----
SELECT n.nspname AS "Schema",
	  c.relname AS "Table",
	  s.srvname AS "Server"
	FROM pg_catalog.pg_foreign_table ft
	  INNER JOIN pg_catalog.pg_class c ON c.oid = ft.ftrelid
	  INNER JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	  INNER JOIN pg_catalog.pg_foreign_server s ON s.oid = ft.ftserver
	WHERE pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY 1, 2;
-- ----
SELECT um.srvname AS "Server",
	  um.usename AS "User name"
	FROM pg_catalog.pg_user_mappings um
	ORDER BY 1, 2;
-- ----
SELECT oid as "ID",
	  pg_catalog.pg_get_userbyid(lomowner) as "Owner",
	  pg_catalog.obj_description(oid, 'pg_largeobject') as "Description"
	FROM pg_catalog.pg_largeobject_metadata
	ORDER BY oid
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
	  CASE c.relkind WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	 c2.oid::pg_catalog.regclass as "Table"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	     LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
	     LEFT JOIN pg_catalog.pg_class c2 ON i.indrelid = c2.oid
	WHERE c.relkind IN ('p','I','')
	 AND NOT c.relispartition
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY "Schema", "Type" DESC, "Name";
-- ----
SELECT n.nspname as "Schema",
	  c.relname as "Name",
	  pg_catalog.pg_get_userbyid(c.relowner) as "Owner",
	  CASE c.relkind WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
	 c2.oid::pg_catalog.regclass as "Table",
	  s.tps as "Total size",
	  pg_catalog.obj_description(c.oid, 'pg_class') as "Description"
	FROM pg_catalog.pg_class c
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	     LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
	     LEFT JOIN pg_catalog.pg_class c2 ON i.indrelid = c2.oid,
	     LATERAL (SELECT pg_catalog.pg_size_pretty(sum(
	                 CASE WHEN ppt.isleaf AND ppt.level = 1
	                      THEN pg_catalog.pg_table_size(ppt.relid) ELSE 0 END)) AS dps,
	                     pg_catalog.pg_size_pretty(sum(pg_catalog.pg_table_size(ppt.relid))) AS tps
	              FROM pg_catalog.pg_partition_tree(c.oid) ppt) s
	WHERE c.relkind IN ('p','I','')
	 AND NOT c.relispartition
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname !~ '^pg_toast'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_table_is_visible(c.oid)
	ORDER BY "Schema", "Type" DESC, "Name";
-- ----
SELECT rolname AS "Role", datname AS "Database",
	pg_catalog.array_to_string(setconfig, E'\n') AS "Settings"
	FROM pg_catalog.pg_db_role_setting s
	LEFT JOIN pg_catalog.pg_database d ON d.oid = setdatabase
	LEFT JOIN pg_catalog.pg_roles r ON r.oid = setrole
	ORDER BY 1, 2;
-- ----
SELECT pubname AS "Name",
	  pg_catalog.pg_get_userbyid(pubowner) AS "Owner",
	  puballtables AS "All tables",
	  pubinsert AS "Inserts",
	  pubupdate AS "Updates",
	  pubdelete AS "Deletes",
	  pubtruncate AS "Truncates",
	  pubviaroot AS "Via root"
	FROM pg_catalog.pg_publication
	ORDER BY 1;
-- ----
SELECT subname AS "Name"
	,  pg_catalog.pg_get_userbyid(subowner) AS "Owner"
	,  subenabled AS "Enabled"
	,  subpublications AS "Publication"
	FROM pg_catalog.pg_subscription
	WHERE subdbid = (SELECT oid
	                 FROM pg_catalog.pg_database
	                 WHERE datname = pg_catalog.current_database())ORDER BY 1;
-- ----
SELECT s.name AS "Parameter", pg_catalog.current_setting(s.name) AS "Value"
	FROM pg_catalog.pg_settings s
	WHERE s.source <> 'default' AND
	      s.setting IS DISTINCT FROM s.boot_val
	ORDER BY 1;
-- ----
SELECT s.name AS "Parameter", pg_catalog.current_setting(s.name) AS "Value"
	FROM pg_catalog.pg_settings s
	WHERE pg_catalog.lower(s.name) OPERATOR(pg_catalog.~) '^(work_mem)$' COLLATE pg_catalog.default
	ORDER BY 1;
-- ----
SELECT d.datname as "Name",
	       pg_catalog.pg_get_userbyid(d.datdba) as "Owner",
	       pg_catalog.pg_encoding_to_char(d.encoding) as "Encoding",
	       d.datcollate as "Collate",
	       d.datctype as "Ctype",
	       d.daticulocale as "ICU Locale",
	       CASE d.datlocprovider WHEN 'c' THEN 'libc' WHEN 'i' THEN 'icu' END AS "Locale Provider",
	       pg_catalog.array_to_string(d.datacl, E'\n') AS "Access privileges"
	FROM pg_catalog.pg_database d
	ORDER BY 1;
-- ----
SELECT d.datname as "Name",
	       pg_catalog.pg_get_userbyid(d.datdba) as "Owner",
	       pg_catalog.pg_encoding_to_char(d.encoding) as "Encoding",
	       d.datcollate as "Collate",
	       d.datctype as "Ctype",
	       d.daticulocale as "ICU Locale",
	       CASE d.datlocprovider WHEN 'c' THEN 'libc' WHEN 'i' THEN 'icu' END AS "Locale Provider",
	       pg_catalog.array_to_string(d.datacl, E'\n') AS "Access privileges",
	       CASE WHEN pg_catalog.has_database_privilege(d.datname, 'CONNECT')
	          OR pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE')
	            THEN pg_catalog.pg_size_pretty(pg_catalog.pg_database_size(d.datname))
	            ELSE 'No Access'
	       END as "Size",
	       t.spcname as "Tablespace",
	       pg_catalog.shobj_description(d.oid, 'pg_database') as "Description"
	FROM pg_catalog.pg_database d
	  JOIN pg_catalog.pg_tablespace t on d.dattablespace = t.oid
	ORDER BY 1;
-- ----
SELECT n.nspname as "Schema",
	  o.oprname AS "Name",
	  CASE WHEN o.oprkind='l' THEN NULL ELSE pg_catalog.format_type(o.oprleft, NULL) END AS "Left arg type",
	  CASE WHEN o.oprkind='r' THEN NULL ELSE pg_catalog.format_type(o.oprright, NULL) END AS "Right arg type",
	  pg_catalog.format_type(o.oprresult, NULL) AS "Result type",
	  coalesce(pg_catalog.obj_description(o.oid, 'pg_operator'),
	           pg_catalog.obj_description(o.oprcode, 'pg_proc')) AS "Description"
	FROM pg_catalog.pg_operator o
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace
	WHERE n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_operator_is_visible(o.oid)
	ORDER BY 1, 2, 3, 4;
-- ----
SELECT n.nspname as "Schema",
	  o.oprname AS "Name",
	  CASE WHEN o.oprkind='l' THEN NULL ELSE pg_catalog.format_type(o.oprleft, NULL) END AS "Left arg type",
	  CASE WHEN o.oprkind='r' THEN NULL ELSE pg_catalog.format_type(o.oprright, NULL) END AS "Right arg type",
	  pg_catalog.format_type(o.oprresult, NULL) AS "Result type",
	  o.oprcode AS "Function",
	  coalesce(pg_catalog.obj_description(o.oid, 'pg_operator'),
	           pg_catalog.obj_description(o.oprcode, 'pg_proc')) AS "Description"
	FROM pg_catalog.pg_operator o
	     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace
	WHERE n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	  AND pg_catalog.pg_operator_is_visible(o.oid)
	ORDER BY 1, 2, 3, 4;
-- ----
SELECT 'f'::pg_catalog.regproc::pg_catalog.oid
-- ----
SELECT pg_catalog.pg_get_functiondef(16426)
-- ----
SELECT 'v'::pg_catalog.regclass::pg_catalog.oid
-- ----
SELECT nspname, relname, relkind, pg_catalog.pg_get_viewdef(c.oid, true), pg_catalog.array_remove(pg_catalog.array_remove(c.reloptions,'check_option=local'),'check_option=cascaded') AS reloptions, CASE WHEN 'check_option=local' = ANY (c.reloptions) THEN 'LOCAL'::text WHEN 'check_option=cascaded' = ANY (c.reloptions) THEN 'CASCADED'::text ELSE NULL END AS checkoption FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON c.relnamespace = n.oid WHERE c.oid = 16413
-- ----
SELECT n.nspname AS "Schema",
	       c.collname AS "Name",
	       c.collcollate AS "Collate",
	       c.collctype AS "Ctype",
	       c.colliculocale AS "ICU Locale",
	       CASE c.collprovider WHEN 'd' THEN 'default' WHEN 'c' THEN 'libc' WHEN 'i' THEN 'icu' END AS "Provider",
	       CASE WHEN c.collisdeterministic THEN 'yes' ELSE 'no' END AS "Deterministic?"
	FROM pg_catalog.pg_collation c, pg_catalog.pg_namespace n
	WHERE n.oid = c.collnamespace
	      AND n.nspname <> 'pg_catalog'
	      AND n.nspname <> 'information_schema'
	      AND c.collencoding IN (-1, pg_catalog.pg_char_to_encoding(pg_catalog.getdatabaseencoding()))
	  AND pg_catalog.pg_collation_is_visible(c.oid)
	ORDER BY 1, 2;
-- ----
select count(*), string_agg(word, ' ' order by word) from pg_get_keywords()
-- ----
select string_agg(word, ' ' order by word) from pg_get_keywords()
-- ----
select version();
-- ----
select * from information_schema.tables where table_name = $1 and table_schema = current_schema()
-- ----
select * from information_schema.columns where table_name = $1 and column_name = $2 and table_schema = current_schema()
-- ----
select * from information_schema.columns where table_name = $1 and table_catalog = current_database() and table_schema = current_schema()
-- ----
select version()
-- ----
select "a"."attname" as "column", "a"."attnotnull" as "not_null", "a"."atthasdef" as "has_default", "c"."relname" as "table", "c"."relkind" as "table_type", "ns"."nspname" as "schema", "typ"."typname" as "type", "dtns"."nspname" as "type_schema", col_description(a.attrelid, a.attnum) as "column_description", pg_get_serial_sequence(quote_ident(ns.nspname) || '.' || quote_ident(c.relname), a.attname) as "auto_incrementing" from "pg_catalog"."pg_attribute" as "a" inner join "pg_catalog"."pg_class" as "c" on "a"."attrelid" = "c"."oid" inner join "pg_catalog"."pg_namespace" as "ns" on "c"."relnamespace" = "ns"."oid" inner join "pg_catalog"."pg_type" as "typ" on "a"."atttypid" = "typ"."oid" inner join "pg_catalog"."pg_namespace" as "dtns" on "typ"."typnamespace" = "dtns"."oid" where "c"."relkind" in ($1, $2, $3) and "ns"."nspname" !~ $4 and "ns"."nspname" != $5 and "ns"."nspname" != $6 and has_schema_privilege(ns.nspname, 'USAGE') and "a"."attnum" >= $7 and "a"."attisdropped" != $8 and "c"."relname" != $9 and "c"."relname" != $10 order by "ns"."nspname", "c"."relname", "a"."attnum"
-- ----
select "nspname" from "pg_catalog"."pg_namespace"
-- ----
SELECT t.oid, typarray
	FROM pg_type t JOIN pg_namespace ns
	    ON typnamespace = ns.oid
	WHERE typname = 'hstore';
-- ----
SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg_%' ORDER BY nspname
-- ----
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('v', 'm')
-- ----
SELECT pg_get_viewdef(c.oid) view_def FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relname = 'v' AND c.relkind IN ('v', 'm')
-- ----
SELECT c.oid
	            FROM pg_catalog.pg_class c
	            LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	            WHERE (pg_catalog.pg_table_is_visible(c.oid))
	            AND c.relname = 'visits' AND c.relkind in
	            ('r', 'v', 'm', 'f', 'p')
-- ----
SELECT a.attname,
	              pg_catalog.format_type(a.atttypid, a.atttypmod),
	              (
	                SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid)
	                FROM pg_catalog.pg_attrdef d
	                WHERE d.adrelid = a.attrelid AND d.adnum = a.attnum
	                AND a.atthasdef
	              ) AS DEFAULT,
	              a.attnotnull,
	              a.attrelid as table_oid,
	              pgd.description as comment,
	              a.attgenerated as generated,
	                              (SELECT json_build_object(
	                    'always', a.attidentity = 'a',
	                    'start', s.seqstart,
	                    'increment', s.seqincrement,
	                    'minvalue', s.seqmin,
	                    'maxvalue', s.seqmax,
	                    'cache', s.seqcache,
	                    'cycle', s.seqcycle)
	                FROM pg_catalog.pg_sequence s
	                JOIN pg_catalog.pg_class c on s.seqrelid = c."oid"
	                WHERE c.relkind = 'S'
	                AND a.attidentity != ''
	                AND s.seqrelid = pg_catalog.pg_get_serial_sequence(
	                    a.attrelid::regclass::text, a.attname
	                )::regclass::oid
	                ) as identity_options                
	            FROM pg_catalog.pg_attribute a
	            LEFT JOIN pg_catalog.pg_description pgd ON (
	                pgd.objoid = a.attrelid AND pgd.objsubid = a.attnum)
	            WHERE a.attrelid = 16401
	            AND a.attnum > 0 AND NOT a.attisdropped
	            ORDER BY a.attnum
-- ----
SELECT t.typname as "name",
	               pg_catalog.format_type(t.typbasetype, t.typtypmod) as "attype",
	               not t.typnotnull as "nullable",
	               t.typdefault as "default",
	               pg_catalog.pg_type_is_visible(t.oid) as "visible",
	               n.nspname as "schema"
	            FROM pg_catalog.pg_type t
	               LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
	            WHERE t.typtype = 'd'
-- ----
SELECT t.typname as "name",
	               -- no enum defaults in 8.4 at least
	               -- t.typdefault as "default",
	               pg_catalog.pg_type_is_visible(t.oid) as "visible",
	               n.nspname as "schema",
	               e.enumlabel as "label"
	            FROM pg_catalog.pg_type t
	                 LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
	                 LEFT JOIN pg_catalog.pg_enum e ON t.oid = e.enumtypid
	            WHERE t.typtype = 'e'
	        ORDER BY "schema", "name", e.oid
-- ----
SELECT c.oid
	            FROM pg_catalog.pg_class c
	            LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	            WHERE (pg_catalog.pg_table_is_visible(c.oid))
	            AND c.relname = 'patients' AND c.relkind in
	            ('r', 'v', 'm', 'f', 'p')
-- ----
SELECT a.attname
	                FROM pg_attribute a JOIN (
	                    SELECT unnest(ix.indkey) attnum,
	                           generate_subscripts(ix.indkey, 1) ord
	                    FROM pg_index ix
	                    WHERE ix.indrelid = 16393 AND ix.indisprimary
	                    ) k ON a.attnum=k.attnum
	                WHERE a.attrelid = 16393
	                ORDER BY k.ord
-- ----
SELECT conname
	           FROM  pg_catalog.pg_constraint r
	           WHERE r.conrelid = 16393 AND r.contype = 'p'
	           ORDER BY 1
-- ----
SELECT r.conname,
	                pg_catalog.pg_get_constraintdef(r.oid, true) as condef,
	                n.nspname as conschema
	          FROM  pg_catalog.pg_constraint r,
	                pg_namespace n,
	                pg_class c
	
	          WHERE r.conrelid = 16401 AND
	                r.contype = 'f' AND
	                c.oid = confrelid AND
	                n.oid = c.relnamespace
	          ORDER BY 1
-- ----
SELECT
	                  i.relname as relname,
	                  ix.indisunique, ix.indexprs,
	                  a.attname, a.attnum, c.conrelid, ix.indkey::varchar,
	                  ix.indoption::varchar, i.reloptions, am.amname,
	                  pg_get_expr(ix.indpred, ix.indrelid),
	                  ix.indnkeyatts as indnkeyatts
	              FROM
	                  pg_class t
	                        join pg_index ix on t.oid = ix.indrelid
	                        join pg_class i on i.oid = ix.indexrelid
	                        left outer join
	                            pg_attribute a
	                            on t.oid = a.attrelid and a.attnum = ANY(ix.indkey)
	                        left outer join
	                            pg_constraint c
	                            on (ix.indrelid = c.conrelid and
	                                ix.indexrelid = c.conindid and
	                                c.contype in ('p', 'u', 'x'))
	                        left outer join
	                            pg_am am
	                            on i.relam = am.oid
	              WHERE
	                  t.relkind IN ('r', 'v', 'f', 'm', 'p')
	                  and t.oid = 16401
	                  and ix.indisprimary = 'f'
	              ORDER BY
	                  t.relname,
	                  i.relname
-- ----
SELECT
	                cons.conname as name,
	                cons.conkey as key,
	                a.attnum as col_num,
	                a.attname as col_name
	            FROM
	                pg_catalog.pg_constraint cons
	                join pg_attribute a
	                  on cons.conrelid = a.attrelid AND
	                    a.attnum = ANY(cons.conkey)
	            WHERE
	                cons.conrelid = 16401 AND
	                cons.contype = 'u'
-- ----
SELECT
	                cons.conname as name,
	                pg_get_constraintdef(cons.oid) as src
	            FROM
	                pg_catalog.pg_constraint cons
	            WHERE
	                cons.conrelid = 16401 AND
	                cons.contype = 'c'
-- ----
SELECT
	                pgd.description as table_comment
	            FROM
	                pg_catalog.pg_description pgd
	            WHERE
	                pgd.objsubid = 0 AND
	                pgd.objoid = 16401
-- ----
SELECT relname FROM pg_class c join pg_namespace n on n.oid=c.relnamespace where relkind='S' and n.nspname='public'
-- ----
select relname from pg_class c join pg_namespace n on n.oid=c.relnamespace where pg_catalog.pg_table_is_visible(c.oid) and relname='visits'
-- ----
SELECT t.typname as "name",
	               -- no enum defaults in 8.4 at least
	               -- t.typdefault as "default",
	               pg_catalog.pg_type_is_visible(t.oid) as "visible",
	               n.nspname as "schema",
	               e.enumlabel as "label"
	            FROM pg_catalog.pg_type t
	                 LEFT JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
	                 LEFT JOIN pg_catalog.pg_enum e ON t.oid = e.enumtypid
	            WHERE t.typtype = 'e'
	        AND n.nspname = 'public' ORDER BY "schema", "name", e.oid
