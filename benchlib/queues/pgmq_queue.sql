-- pgmq (Tembo's Postgres message queue), called through its public SQL API.
-- The pgmq schema itself comes from the SQL file its PyPI package ships (pgmq_queue.py).

-- name: uninstall
-- Our queue goes; the pgmq schema goes too when it is a SQL-only install holding no
-- other queue (so a user's own pgmq, extension or not, is left alone).
DO $$
BEGIN
    IF to_regclass('pgmq.meta') IS NOT NULL THEN
        PERFORM pgmq.drop_queue(queue_name) FROM pgmq.meta WHERE queue_name = 'benchlib_drain';
        IF NOT EXISTS (SELECT 1 FROM pgmq.meta)
           AND NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pgmq') THEN
            DROP SCHEMA pgmq CASCADE;
        END IF;
    END IF;
END
$$;

-- name: installed
SELECT to_regclass('pgmq.meta') IS NOT NULL;

-- name: install
SELECT pgmq.create('benchlib_drain');

-- name: enqueue_many
SELECT * FROM pgmq.send_batch('benchlib_drain', $1::jsonb[]);

-- name: settle
ANALYZE pgmq.q_benchlib_drain;

-- name: checkpoint
CHECKPOINT;

-- name: dequeue
-- A visibility timeout of 30 s (the pgmq client's default): far longer than any
-- read -> archive gap in a drain, so no message reappears while it is being handled.
SELECT msg_id FROM pgmq.read('benchlib_drain', 30, $1);

-- name: ack
-- archive, not delete: the done job is kept in pgmq.a_benchlib_drain, as pgqrs's
-- archive_many keeps it, so the two real systems do the same work per job.
SELECT pgmq.archive('benchlib_drain', $1::bigint[]);

-- name: present
-- Accounting by id (the durability study's crash cells, the pgbench limit): a message
-- exists while it waits in the queue table and after pgmq.archive moved it.
SELECT msg_id FROM pgmq.q_benchlib_drain WHERE msg_id = ANY($1::bigint[])
UNION ALL
SELECT msg_id FROM pgmq.a_benchlib_drain WHERE msg_id = ANY($1::bigint[]);

-- name: undone
SELECT msg_id FROM pgmq.q_benchlib_drain WHERE msg_id = ANY($1::bigint[]);
