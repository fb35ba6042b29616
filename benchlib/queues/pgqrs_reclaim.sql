-- pgqrs's rescue of a dead consumer's messages (pgqrs_queue.py, Reclaim), for its process form
-- with `reclaim_every_s` set. The Python bindings of pgqrs 0.15.3 have neither
-- Consumer.heartbeat nor Admin.reclaim_messages, so these are the statements those run, in the
-- schema pgqrs_queue.SCHEMA; the release itself goes through pgqrs.admin(store).release_worker_messages.
-- A file of its own (Pgqrs.settings_code): only the cells that give settings are keyed by it.

-- name: heartbeat
-- Consumer::heartbeat (crates/pgqrs/src/store/postgres/dialect.rs:285) for every live consumer
-- of this process at once; the status each one has tells a consumer that another process took
-- it for dead (stopped) while this one was frozen, or that its row is gone (not returned).
UPDATE benchlib_pgqrs.pgqrs_workers
SET heartbeat_at = NOW()
WHERE id = ANY($1::bigint[])
RETURNING id, status::text;

-- name: zombies
-- reclaim_messages' zombies (crates/pgqrs/src/store/postgres/tables/pgqrs_workers.rs:62
-- LIST_ZOMBIE_WORKERS: the queue's workers whose heartbeat is older than $2 seconds), marked
-- stopped as it marks them (dialect.rs:249 mark_stopped), in one statement so a heartbeat that
-- lands meanwhile wins (the row lock orders them and the condition is read again). Narrowed to
-- workers holding unarchived messages (a stale worker holding none has nothing to bring back;
-- our producer, which never beats, stays as it is), never this process's own ($3), and widened
-- to one already stopped that still holds some (its reclaimer died between mark and release).
UPDATE benchlib_pgqrs.pgqrs_workers w
SET status = 'stopped', shutdown_at = COALESCE(w.shutdown_at, NOW())
WHERE w.queue_id = (SELECT id FROM benchlib_pgqrs.pgqrs_queues WHERE queue_name = $1)
  AND w.heartbeat_at < NOW() - make_interval(secs => $2::double precision)
  AND w.id <> ALL($3::bigint[])
  AND EXISTS (SELECT 1 FROM benchlib_pgqrs.pgqrs_messages m
              WHERE m.consumer_worker_id = w.id AND m.archived_at IS NULL)
RETURNING w.id;
