-- `pgq`: the real PgQ (the `pgq` extension, Debian's postgresql-<major>-pgq3), called
-- through its public SQL API only. Why and how: see the docstring of pgq.py.
-- The queue is always 'benchlib'; consumer names (groups) come as parameters.

-- name: available
-- Whether this server can CREATE EXTENSION pgq, and its major version (for the error).
SELECT (SELECT default_version FROM pg_available_extensions WHERE name = 'pgq') AS default_version,
       current_setting('server_version_num')::int / 10000 AS major;

-- name: uninstall
-- Our queue goes (with its consumers: drop_queue's force); the extension goes too when
-- no other queue is left in it, so the next install starts from PgQ's empty tables.
DO $$
BEGIN
    IF to_regclass('pgq.queue') IS NOT NULL THEN
        PERFORM pgq.drop_queue(queue_name, true) FROM pgq.queue WHERE queue_name = 'benchlib';
        IF NOT EXISTS (SELECT 1 FROM pgq.queue) THEN
            DROP EXTENSION IF EXISTS pgq;
        END IF;
    END IF;
END
$$;

-- name: create_extension
CREATE EXTENSION IF NOT EXISTS pgq;

-- name: extversion
SELECT extversion FROM pg_extension WHERE extname = 'pgq';

-- name: create_queue
-- Creates pgq.event_<id> and its children pgq.event_<id>_0..2, and takes the first tick.
SELECT pgq.create_queue('benchlib');

-- name: set_queue_config
SELECT pgq.set_queue_config('benchlib', $1, $2);

-- name: register_consumer
SELECT pgq.register_consumer('benchlib', $1);

-- name: unregister_consumer
SELECT pgq.unregister_consumer('benchlib', $1);

-- name: consumer_registered
SELECT EXISTS (SELECT 1 FROM pgq.get_consumer_info('benchlib', $1));

-- name: enqueue_many
-- One pgq.insert_event per payload, in one statement (one transaction): PgQ has no
-- batch insert function; a producer inserting a batch calls it once per event.
SELECT pgq.insert_event('benchlib', 'benchlib', u.p)
FROM unnest($1::text[]) WITH ORDINALITY AS u(p, i)
ORDER BY u.i;

-- name: tick
-- What pgqd's ticker sends every ticker_period: a tick for every queue that needs one
-- (with ticker_max_lag = ticker_idle_period = 0, ours always does). Returns the number
-- of queues ticked.
SELECT pgq.ticker();

-- name: maint_operations
-- What pgqd's maintenance asks for, then calls one by one, each in its own transaction.
SELECT func_name, func_arg FROM pgq.maint_operations();

-- name: next_batch
SELECT pgq.next_batch('benchlib', $1);

-- name: get_batch_events
SELECT ev_id, ev_data AS payload, ev_time FROM pgq.get_batch_events($1);

-- name: finish_batch
SELECT pgq.finish_batch($1);

-- name: settle
-- Statistics for PgQ's tables and every event child (batch reads go by ev_txid index).
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT pgq.quote_fqname(q.queue_data_pfx || '_' || k)
             FROM pgq.queue q, generate_series(0, q.queue_ntables - 1) AS k
             WHERE q.queue_name = 'benchlib'
    LOOP
        EXECUTE 'ANALYZE ' || t;
    END LOOP;
END
$$;
ANALYZE pgq.tick, pgq.subscription, pgq.queue, pgq.consumer;

-- name: queue_state
-- PgQ's own rotation state: the child taking inserts and the last switch.
SELECT q.queue_id, q.queue_ntables, q.queue_cur_table, q.queue_switch_time,
       q.queue_switch_step1, q.queue_switch_step2, q.queue_rotation_period, q.queue_data_pfx,
       (SELECT max(t.tick_id) FROM pgq.tick t WHERE t.tick_queue = q.queue_id) AS tick_id
FROM pgq.queue q
WHERE q.queue_name = 'benchlib';

-- name: rows_per_child
-- Exact rows of each child table pgq.event_<id>_<k>, read as PgQ names them.
SELECT k AS child, q.queue_data_pfx || '_' || k AS table_name, k = q.queue_cur_table AS is_current,
       (xpath('/row/n/text()',
              query_to_xml(format('SELECT count(*) AS n FROM %s', pgq.quote_fqname(q.queue_data_pfx || '_' || k)),
                           false, true, '')))[1]::text::bigint AS n_rows
FROM pgq.queue q, generate_series(0, q.queue_ntables - 1) AS k
WHERE q.queue_name = 'benchlib'
ORDER BY k;

-- name: table_stats
-- Per table of the pgq schema: kind ('event' = the queue's children and parent, else
-- 'control'), as rotation's table_stats reports its own.
SELECT c.relname::text AS table_name,
       CASE WHEN c.relname LIKE 'event\_%' OR c.relname = 'event_template' THEN 'event' ELSE 'control' END AS kind,
       s.n_live_tup, s.n_dead_tup, pg_total_relation_size(c.oid) AS total_bytes,
       s.n_tup_ins, s.n_tup_upd, s.n_tup_del, s.autovacuum_count
FROM pg_class c
JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.relkind = 'r' AND c.relnamespace = 'pgq'::regnamespace
ORDER BY kind DESC, table_name;
