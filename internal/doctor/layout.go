package doctor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/dpproxy/dpproxy/policy"
	"github.com/jackc/pgx/v5"
)

// checkLayout reports, for each protected table, how its rows are laid out
// with respect to its unit column, and what that means for the latency of
// its DP answers. Every DP query first aggregates each unit's rows (the
// per-unit stage that bounds contributions); that stage parallelises only
// where the table is split by the unit:
//
//   - distributed with Citus by the unit column (hash): the per-unit stage
//     runs inside each shard, on the workers in parallel, and only per-group
//     partial results reach the coordinator. Tables joined on the unit must
//     also be colocated. Distributed by another column (or a reference
//     table), Citus can push neither the per-unit GROUP BY nor the per-unit
//     windows down: a warning, since such queries are slow or fail;
//   - hash-partitioned by the unit column on one node: with partitionwise
//     aggregation, which dpproxy turns on for its DP queries, the per-unit
//     aggregate finishes inside each partition. Partitioned by another key,
//     each unit's rows span partitions and the per-unit stage runs over all
//     of them after an Append: a warning;
//   - a plain table: one per-unit aggregate over the whole table, the floor
//     BENCHMARKS.md measures (ok; partition or distribute it to go faster).
//
// It reads only catalogs, as the data role (pg_dist_partition is readable
// by every role where Citus is installed).
func checkLayout(ctx context.Context, r *Report, ds, dataDSN string, pol *policy.Dataset) error {
	up, err := connect(ctx, dataDSN)
	if err != nil {
		return fmt.Errorf("datasets.%s.upstream: connect: %w", ds, err)
	}
	defer up.Close(context.Background())
	var hasCitus bool
	if err := up.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')").Scan(&hasCitus); err != nil {
		return fmt.Errorf("datasets.%s.upstream: %w", ds, err)
	}
	colocation := map[int64][]string{} // Citus colocation group → protected tables distributed by their unit
	for _, name := range pol.TableOrder {
		t := pol.Tables[name]
		if t.Public {
			continue
		}
		qual := quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
		if hasCitus {
			var method string
			var column *string
			var coloc int64
			err := up.QueryRow(ctx, `SELECT partmethod::text, pg_catalog.column_to_column_name(logicalrelid, partkey), colocationid
				FROM pg_catalog.pg_dist_partition WHERE logicalrelid = pg_catalog.to_regclass($1)`, qual).Scan(&method, &column, &coloc)
			switch {
			case err == nil:
				col := ""
				if column != nil {
					col = *column
				}
				switch {
				case method == "h" && col == t.UnitColumn:
					colocation[coloc] = append(colocation[coloc], t.Name)
					r.add(ds, true, "table %s is distributed by its unit column %s (Citus, hash, colocation group %d): the per-unit stage of its DP queries runs inside the shards, in parallel on the workers, and only per-group partial results reach the coordinator", t.Name, t.UnitColumn, coloc)
				case method == "n":
					r.add(ds, false, "table %s is a Citus reference table (a full copy on every node), not distributed by its unit column %s: its DP queries run their per-unit stage on one node; distribute it: SELECT undistribute_table('%s'); SELECT create_distributed_table('%s', '%s')", t.Name, t.UnitColumn, qual, qual, t.UnitColumn)
				default:
					r.add(ds, false, "table %s is distributed by %s (Citus, method %s), not by its unit column %s: Citus can push neither the per-unit GROUP BY nor the per-unit windows of its DP queries down to the shards, so they pull rows to the coordinator or fail (an incident after the charge); redistribute it: SELECT alter_distributed_table('%s', distribution_column := '%s')", t.Name, orUnknown(col), method, t.UnitColumn, qual, t.UnitColumn)
				}
				continue
			case !errors.Is(err, pgx.ErrNoRows):
				r.add(ds, false, "table %s: cannot read its Citus distribution (pg_dist_partition) as the data role: %s", t.Name, oneLine(err))
				continue
			}
		}
		var strategy string
		var keys []string
		var parts int
		err := up.QueryRow(ctx, `SELECT pt.partstrat::text,
				ARRAY(SELECT COALESCE(a.attname::text, '(expression)') FROM unnest(pt.partattrs::int2[]) WITH ORDINALITY AS k(attnum, i)
					LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = k.attnum ORDER BY k.i),
				(SELECT count(*) FROM pg_catalog.pg_inherits i WHERE i.inhparent = pt.partrelid)
			FROM pg_catalog.pg_partitioned_table pt WHERE pt.partrelid = pg_catalog.to_regclass($1)`, qual).Scan(&strategy, &keys, &parts)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			where := "a plain table on one node"
			if hasCitus {
				where = "a local table on the Citus coordinator (not distributed)"
			}
			r.add(ds, true, "table %s is %s: the per-unit stage of each DP query is one aggregate over the whole table, the floor of its latency (BENCHMARKS.md); hash-partitioning it by %s, or distributing it by %s with Citus, lets that stage run per partition or per shard, in parallel", t.Name, where, t.UnitColumn, t.UnitColumn)
		case err != nil:
			r.add(ds, false, "table %s: cannot read its partitioning as the data role: %s", t.Name, oneLine(err))
		case strategy == "h" && len(keys) == 1 && keys[0] == t.UnitColumn:
			r.add(ds, true, "table %s is hash-partitioned by its unit column %s into %d partitions: each unit's rows are in one partition, so with partitionwise aggregation (on for every DP query) the per-unit aggregate finishes inside each partition and can run in parallel", t.Name, t.UnitColumn, parts)
		default:
			r.add(ds, false, "table %s is partitioned by %s (%s), not hash-partitioned by its unit column %s alone: a unit's rows span partitions, so the per-unit stage of its DP queries aggregates all partitions after an Append and partitioning does not speed it up; hash-partition it by %s", t.Name, strings.Join(keys, ", "), strategyName(strategy), t.UnitColumn, t.UnitColumn)
		}
	}
	if len(colocation) > 1 {
		var groups []string
		for g, ts := range colocation {
			groups = append(groups, fmt.Sprintf("%s in group %d", strings.Join(ts, ", "), g))
		}
		sort.Strings(groups)
		r.add(ds, false, "the protected tables distributed by their unit are in %d Citus colocation groups (%s): joins on the unit between them cannot run shard by shard; colocate them (create_distributed_table(…, colocate_with => …) or alter_distributed_table)", len(colocation), strings.Join(groups, "; "))
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "no column"
	}
	return s
}

func strategyName(s string) string {
	switch s {
	case "h":
		return "hash"
	case "r":
		return "range"
	case "l":
		return "list"
	}
	return s
}
