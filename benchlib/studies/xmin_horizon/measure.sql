-- The xmin-horizon study's own statements (the queues bring theirs).
-- name: bystander_install
DROP TABLE IF EXISTS bystander;
CREATE TABLE bystander (id bigint PRIMARY KEY, payload text NOT NULL);

-- name: bystander_fill
-- 256-byte payloads, filled server-side in one statement
INSERT INTO bystander (id, payload)
SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, $1::bigint) AS g;

-- name: bystander_settle
VACUUM ANALYZE bystander;

-- name: bystander_lookup
SELECT payload FROM bystander WHERE id = $1;

-- name: table_stats
-- Per kind ('data' = jobs / event children, 'control' = a design's bookkeeping),
-- summed over the cell database's tables: the design's tables are the only ones there.
SELECT CASE WHEN c.relname = ANY ($1::text[]) THEN 'control' ELSE 'data' END AS kind,
       sum(s.n_live_tup)::bigint AS n_live_tup,
       sum(s.n_dead_tup)::bigint AS n_dead_tup,
       sum(s.autovacuum_count)::bigint AS autovacuum_count,
       sum(pg_total_relation_size(c.oid))::bigint AS bytes
FROM pg_stat_user_tables s
JOIN pg_class c ON c.oid = s.relid
GROUP BY 1;

-- name: horizon
-- The data horizon is what backends (their xmin, or their own xid while a
-- transaction that wrote stays open) and slot xmins hold; a logical slot holds
-- catalog_xmin (system catalogs) and WAL, reported apart. 0 when nothing holds.
SELECT
    (SELECT coalesce(max(greatest(age(backend_xmin), age(backend_xid))), 0) FROM pg_stat_activity
      WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND pid <> pg_backend_pid())
        AS backend_xmin_age,
    (SELECT coalesce(extract(epoch FROM clock_timestamp() - min(xact_start)), 0) FROM pg_stat_activity
      WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND pid <> pg_backend_pid())
        AS backend_xmin_age_s,
    (SELECT max(age(xmin)) FROM pg_replication_slots WHERE xmin IS NOT NULL) AS slot_xmin_age,
    (SELECT max(age(catalog_xmin)) FROM pg_replication_slots WHERE catalog_xmin IS NOT NULL) AS catalog_xmin_age,
    (SELECT max(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)) FROM pg_replication_slots)::bigint
        AS slot_retained_wal_bytes;

-- name: wal_level
SELECT current_setting('wal_level');

-- name: settings_named
-- The server's values of the settings the study asked for, recorded per cell.
SELECT name, current_setting(name) AS value FROM pg_settings WHERE name = ANY($1::text[]);
