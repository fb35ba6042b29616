-- What the workload's sampler reads from the server while a cell runs.

-- name: table_stats
-- Per kind ('data' = jobs / event children, 'control' = a system's bookkeeping), summed
-- over the tables of the cell's database that the system keeps ($2, schema-qualified
-- or not; empty = every user table). Control tables are named in $1.
SELECT CASE WHEN c.relname = ANY ($1::text[]) OR (s.schemaname || '.' || c.relname) = ANY ($1::text[])
            THEN 'control' ELSE 'data' END AS kind,
       sum(s.n_live_tup)::bigint AS n_live_tup,
       sum(s.n_dead_tup)::bigint AS n_dead_tup,
       sum(s.autovacuum_count)::bigint AS autovacuum_count,
       sum(pg_total_relation_size(c.oid))::bigint AS bytes
FROM pg_stat_user_tables s
JOIN pg_class c ON c.oid = s.relid
WHERE cardinality($2::text[]) = 0 OR c.relname = ANY ($2::text[]) OR (s.schemaname || '.' || c.relname) = ANY ($2::text[])
   OR c.relname = ANY ($1::text[]) OR (s.schemaname || '.' || c.relname) = ANY ($1::text[])
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

-- name: wait_events
-- What the bench database's client backends are doing right now, one row per bucket:
-- no wait while active = on CPU (or runnable); idle = waiting for its client (the
-- harness's or the library's own time); idle in transaction its own bucket. The
-- sampler's own sessions (application_name benchlib-sampler) and a holder's
-- (benchlib-holder: an idle transaction, the active readers) are left out: the census
-- is the system's sessions, not the pressure on them.
SELECT CASE
         WHEN state = 'active' AND wait_event IS NULL THEN 'CPU'
         WHEN state = 'active' THEN wait_event_type || ':' || wait_event
         WHEN state LIKE 'idle in transaction%' THEN 'IdleInTransaction'
         ELSE 'Client:idle'
       END AS bucket,
       count(*)::int AS n
FROM pg_stat_activity
WHERE backend_type = 'client backend' AND datname = current_database()
  AND pid <> pg_backend_pid() AND application_name NOT LIKE 'benchlib-sampler%'
  AND application_name NOT LIKE 'benchlib-holder%'
GROUP BY 1;
