-- What keeps the xmin horizon back, and the server-side ways to end it (METHOD rule 1).

-- name: rr_snapshot
-- A REPEATABLE READ transaction takes its snapshot at the first query and keeps it
-- until it ends; it never writes, so it has an xmin but no xid.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM pg_class;

-- name: idle_xid
-- An open transaction with an xid assigned ("idle in transaction" after a write).
BEGIN;
SELECT pg_current_xact_id();

-- name: create_slot
SELECT pg_create_logical_replication_slot($1, 'pgoutput');

-- name: drop_slot
SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1;

-- name: slot_exists
SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1;

-- name: terminate
SELECT pg_terminate_backend($1);

-- name: backend_exists
SELECT count(*) FROM pg_stat_activity WHERE pid = $1;

-- name: rr_begin
-- An active reader's transaction: its snapshot is taken at its first count and kept to its end.
BEGIN ISOLATION LEVEL REPEATABLE READ;

-- name: user_tables
-- The tables an active reader counts: every user table of the cell's database but the temporary
-- ones of other sessions (awa's workers keep some), schema-qualified and quoted, in a stable order.
SELECT quote_ident(schemaname) || '.' || quote_ident(relname) AS name
FROM pg_stat_user_tables
WHERE schemaname NOT LIKE 'pg\_temp\_%' AND schemaname NOT LIKE 'pg\_toast\_temp\_%'  -- another session's: unreadable
ORDER BY schemaname, relname;
