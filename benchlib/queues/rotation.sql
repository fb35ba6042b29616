-- `rotation`: a PgQ-style event log in plain SQL and PL/pgSQL (no extension, no
-- background job). Why it is built this way: see the docstring of rotation.py.

-- name: uninstall
DO $$
DECLARE
    f regprocedure;
BEGIN
    -- Functions first: a changed signature could not be replaced in place.
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.proname LIKE 'rotation\_%' AND p.pronamespace = current_schema()::regnamespace
    LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END $$;
DROP TABLE IF EXISTS rotation_events, rotation_ticks, rotation_groups, rotation_members,
    rotation_batches, rotation_state, rotation_log CASCADE;
DROP SEQUENCE IF EXISTS rotation_event_id_seq, rotation_tick_id_seq;

-- name: install
CREATE SEQUENCE rotation_event_id_seq;  -- one id space across all children
CREATE SEQUENCE rotation_tick_id_seq;

-- The event log. Rows are only ever INSERTed; a child is emptied by TRUNCATE alone.
-- The children are list partitions on ev_child, so a producer's INSERT is one static
-- statement and a TRUNCATE locks one child only.
CREATE TABLE rotation_events (
    ev_id    bigint      NOT NULL DEFAULT nextval('rotation_event_id_seq'),
    ev_txid  xid8        NOT NULL DEFAULT pg_current_xact_id(),
    ev_time  timestamptz NOT NULL DEFAULT now(),
    ev_child int         NOT NULL,
    payload  jsonb       NOT NULL
) PARTITION BY LIST (ev_child);
-- The only index: batches are read by transaction id (as in PgQ), and the newest
-- txid of a child decides whether it may be truncated.
CREATE INDEX rotation_events_txid ON rotation_events (ev_txid);

CREATE TABLE rotation_state (
    singleton     bool        PRIMARY KEY DEFAULT true CHECK (singleton),
    n_children    int         NOT NULL,
    cur_child     int         NOT NULL,
    current_since timestamptz NOT NULL
);

CREATE TABLE rotation_ticks (
    tick_id        bigint      PRIMARY KEY,
    tick_time      timestamptz NOT NULL DEFAULT clock_timestamp(),
    tick_snapshot  pg_snapshot NOT NULL,
    tick_event_seq bigint      NOT NULL,  -- ev_id high-water mark, read after the snapshot
    tick_child     int         NOT NULL   -- the child taking inserts at the tick
);

CREATE TABLE rotation_groups (
    group_name    text        PRIMARY KEY,
    cursor_tick   bigint      NOT NULL,  -- the last tick handed out to a member
    registered_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE rotation_members (
    group_name    text        NOT NULL,
    member        text        NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_name, member)
);

-- Open batches only: finishing one deletes its row.
CREATE TABLE rotation_batches (
    batch_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_name text        NOT NULL,
    member     text        NOT NULL,
    prev_tick  bigint      NOT NULL,
    cur_tick   bigint      NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (group_name, member)  -- one open batch per member
);

CREATE TABLE rotation_log (
    rotation_id    bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    rotated_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    from_child     int         NOT NULL,
    to_child       int         NOT NULL,  -- truncated, then made current
    rows_truncated bigint      NOT NULL,
    tick_id        bigint                 -- the newest tick at the time
);

CREATE FUNCTION rotation_setup(p_children int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_children < 2 THEN
        RAISE EXCEPTION 'rotation needs at least 2 child tables, got %', p_children;
    END IF;
    FOR k IN 0 .. p_children - 1 LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF rotation_events FOR VALUES IN (%s)',
                       'rotation_events_' || k, k);
    END LOOP;
    INSERT INTO rotation_state (n_children, cur_child, current_since)
    VALUES (p_children, 0, clock_timestamp());
END $$;

-- Ticks and group registration share one lock so that tick ids follow snapshot
-- order (each tick's snapshot sees every earlier tick committed) and a new group's
-- cursor never points at a tick being pruned.
CREATE FUNCTION rotation_tick_lock() RETURNS void
LANGUAGE sql AS $$ SELECT pg_advisory_xact_lock(hashtext('rotation_tick')::bigint) $$;

-- Ticks still needed: every group's cursor and every open batch's start.
CREATE FUNCTION rotation_frontier_ticks() RETURNS SETOF bigint
LANGUAGE sql STABLE AS $$
    SELECT cursor_tick FROM rotation_groups
    UNION ALL
    SELECT prev_tick FROM rotation_batches
$$;

CREATE FUNCTION rotation_tick() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_tick bigint;
BEGIN
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        -- A snapshot never lists its own transaction as running, so events this
        -- transaction wrote would count as seen by the tick and never be delivered.
        RAISE EXCEPTION 'rotation_tick must run before its transaction writes anything';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'rotation_tick needs READ COMMITTED: the snapshot must be taken after the tick lock';
    END IF;
    PERFORM rotation_tick_lock();
    INSERT INTO rotation_ticks (tick_id, tick_snapshot, tick_event_seq, tick_child)
    SELECT nextval('rotation_tick_id_seq'), pg_current_snapshot(),
           (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM rotation_event_id_seq),
           s.cur_child
    FROM rotation_state s
    RETURNING tick_id INTO v_tick;
    DELETE FROM rotation_ticks
    WHERE tick_id < COALESCE((SELECT min(t) FROM rotation_frontier_ticks() AS t), v_tick);
    RETURN v_tick;
END $$;

CREATE FUNCTION rotation_register_group(p_group text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM rotation_tick_lock();
    -- Like PgQ: a new group starts at the newest tick and sees what commits after it.
    INSERT INTO rotation_groups (group_name, cursor_tick)
    SELECT p_group, max(tick_id) FROM rotation_ticks
    ON CONFLICT (group_name) DO NOTHING;
END $$;

CREATE FUNCTION rotation_unregister_group(p_group text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM rotation_batches WHERE group_name = p_group;
    DELETE FROM rotation_members WHERE group_name = p_group;
    DELETE FROM rotation_groups WHERE group_name = p_group;
END $$;

CREATE FUNCTION rotation_register_member(p_group text, p_member text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM rotation_groups WHERE group_name = p_group) THEN
        RAISE EXCEPTION 'rotation: no consumer group %', p_group;
    END IF;
    INSERT INTO rotation_members (group_name, member) VALUES (p_group, p_member)
    ON CONFLICT DO NOTHING;
END $$;

-- The member's open batch if it has one (PgQ hands an unfinished batch out again),
-- else the next tick range of the group, claimed under the group row's lock so that
-- each range goes to exactly one member; NULL when no newer tick exists.
CREATE FUNCTION rotation_next_batch(p_group text, p_member text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_batch  bigint;
    v_cursor bigint;
    v_next   bigint;
BEGIN
    SELECT batch_id INTO v_batch FROM rotation_batches WHERE group_name = p_group AND member = p_member;
    IF FOUND THEN
        RETURN v_batch;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM rotation_members WHERE group_name = p_group AND member = p_member) THEN
        RAISE EXCEPTION 'rotation: % is not a member of group %', p_member, p_group;
    END IF;
    -- An empty poll must not lock (and so write) the group row.
    IF NOT EXISTS (SELECT 1 FROM rotation_groups g JOIN rotation_ticks t ON t.tick_id > g.cursor_tick
                   WHERE g.group_name = p_group) THEN
        RETURN NULL;
    END IF;
    SELECT cursor_tick INTO v_cursor FROM rotation_groups WHERE group_name = p_group FOR UPDATE;
    SELECT min(tick_id) INTO v_next FROM rotation_ticks WHERE tick_id > v_cursor;
    IF v_next IS NULL THEN
        RETURN NULL;  -- another member took it while we waited for the lock
    END IF;
    UPDATE rotation_groups SET cursor_tick = v_next WHERE group_name = p_group;
    INSERT INTO rotation_batches (group_name, member, prev_tick, cur_tick)
    VALUES (p_group, p_member, v_cursor, v_next)
    RETURNING batch_id INTO v_batch;
    RETURN v_batch;
END $$;

-- The PullQueue path: register the member on first use and tick when the group has
-- caught up with the newest tick, then take a batch as above.
CREATE FUNCTION rotation_dequeue_batch(p_group text, p_member text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_batch bigint;
BEGIN
    SELECT batch_id INTO v_batch FROM rotation_batches WHERE group_name = p_group AND member = p_member;
    IF FOUND THEN
        RETURN v_batch;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM rotation_groups g JOIN rotation_ticks t ON t.tick_id > g.cursor_tick
                   WHERE g.group_name = p_group) THEN
        PERFORM rotation_tick();  -- before any write here, as rotation_tick requires
    END IF;
    PERFORM rotation_register_member(p_group, p_member);
    RETURN rotation_next_batch(p_group, p_member);
END $$;

-- The events of a batch: those whose transaction is visible in the closing tick's
-- snapshot and not in the opening one's, in whichever child they sit. A transaction
-- not visible in the opening snapshot is either at or above its xmax or in its xip
-- list, which bounds the index scan (PgQ builds the same condition).
CREATE FUNCTION rotation_batch_events(p_batch bigint)
RETURNS TABLE (ev_id bigint, payload jsonb, ev_time timestamptz)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    v_prev pg_snapshot;
    v_cur  pg_snapshot;
BEGIN
    SELECT p.tick_snapshot, c.tick_snapshot INTO v_prev, v_cur
    FROM rotation_batches b
    JOIN rotation_ticks p ON p.tick_id = b.prev_tick
    JOIN rotation_ticks c ON c.tick_id = b.cur_tick
    WHERE b.batch_id = p_batch;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rotation: batch % is not open', p_batch;
    END IF;
    RETURN QUERY
    SELECT e.ev_id, e.payload, e.ev_time
    FROM rotation_events e
    WHERE ((e.ev_txid >= pg_snapshot_xmax(v_prev) AND e.ev_txid < pg_snapshot_xmax(v_cur))
           OR e.ev_txid = ANY (ARRAY(SELECT pg_snapshot_xip(v_prev))))
      AND pg_visible_in_snapshot(e.ev_txid, v_cur)
      AND NOT pg_visible_in_snapshot(e.ev_txid, v_prev)
    ORDER BY e.ev_id;
END $$;

CREATE FUNCTION rotation_finish_batch(p_batch bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM rotation_batches WHERE batch_id = p_batch;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'rotation: batch % is not open', p_batch;
    END IF;
END $$;

-- The oldest xmin among the ticks some group still stands on: every transaction
-- below it had finished when that tick was taken, so whatever it committed has been
-- delivered to, and finished by, every group. NULL when no group holds anything.
CREATE FUNCTION rotation_frontier_xmin() RETURNS xid8
LANGUAGE sql STABLE AS $$
    SELECT min(pg_snapshot_xmin(t.tick_snapshot))
    FROM rotation_ticks t
    WHERE t.tick_id IN (SELECT rotation_frontier_ticks())
$$;

-- Switch inserts to the next child, truncating it first. That child is the oldest,
-- so this is allowed only when (1) no transaction that wrote into it is still open
-- (we must get its ACCESS EXCLUSIVE lock; writers hold ROW EXCLUSIVE until they end)
-- and (2) its newest committed txid is below every group's frontier xmin (so every
-- event it holds was delivered and its batch finished). Returns whether it switched.
-- A writer that read the old cur_child and inserts after we commit lands in the
-- child we just made current, and is delivered like any other event.
CREATE FUNCTION rotation_rotate(p_min_age_s float8) RETURNS boolean
LANGUAGE plpgsql
SET lock_timeout = '200ms'  -- readers queue behind our lock request, so keep it short
AS $$
DECLARE
    s          rotation_state;
    v_rel      text;
    v_next     int;
    v_newest   xid8;
    v_frontier xid8;
    v_rows     bigint;
BEGIN
    SELECT * INTO s FROM rotation_state FOR UPDATE;  -- one rotation at a time
    IF clock_timestamp() - s.current_since < make_interval(secs => p_min_age_s) THEN
        RETURN false;
    END IF;
    v_next := (s.cur_child + 1) % s.n_children;
    v_rel := 'rotation_events_' || v_next;
    -- Cheap check without the lock, so a blocked rotation never stalls readers.
    EXECUTE format('SELECT ev_txid FROM %I ORDER BY ev_txid DESC LIMIT 1', v_rel) INTO v_newest;
    v_frontier := rotation_frontier_xmin();
    IF v_newest >= v_frontier THEN
        RETURN false;
    END IF;
    BEGIN
        EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', v_rel);
    EXCEPTION WHEN lock_not_available THEN
        RETURN false;  -- a writer (or a slow reader) is still in there
    END;
    -- Again under the lock: new snapshot, every writer of the child has ended.
    EXECUTE format('SELECT max(ev_txid), count(*) FROM %I', v_rel) INTO v_newest, v_rows;
    v_frontier := rotation_frontier_xmin();
    IF v_newest >= v_frontier THEN
        RETURN false;
    END IF;
    EXECUTE format('TRUNCATE %I', v_rel);
    UPDATE rotation_state SET cur_child = v_next, current_since = clock_timestamp();
    INSERT INTO rotation_log (from_child, to_child, rows_truncated, tick_id)
    VALUES (s.cur_child, v_next, v_rows, (SELECT max(tick_id) FROM rotation_ticks));
    RETURN true;
END $$;

-- name: setup
SELECT rotation_setup($1);

-- name: tick
SELECT rotation_tick();

-- name: rotate
SELECT rotation_rotate($1);

-- name: register_group
SELECT rotation_register_group($1);

-- name: unregister_group
SELECT rotation_unregister_group($1);

-- name: register_member
SELECT rotation_register_member($1, $2);

-- name: next_batch
SELECT rotation_next_batch($1, $2);

-- name: dequeue_batch
SELECT rotation_dequeue_batch($1, $2);

-- name: get_batch_events
SELECT ev_id, payload, ev_time FROM rotation_batch_events($1);

-- name: finish_batch
SELECT rotation_finish_batch($1);

-- name: enqueue_many
INSERT INTO rotation_events (ev_child, payload)
SELECT s.cur_child, p FROM rotation_state s, unnest($1::jsonb[]) AS p
RETURNING ev_id;

-- name: settle
ANALYZE rotation_events, rotation_ticks, rotation_groups, rotation_members, rotation_batches;

-- name: rows_per_child
SELECT k AS child, 'rotation_events_' || k AS table_name, k = s.cur_child AS is_current,
       COALESCE(n.n_rows, 0) AS n_rows
FROM rotation_state s
CROSS JOIN generate_series(0, s.n_children - 1) AS k
LEFT JOIN (SELECT ev_child, count(*) AS n_rows FROM rotation_events GROUP BY ev_child) n ON n.ev_child = k
ORDER BY k;

-- name: table_stats
SELECT c.relname::text AS table_name,
       CASE WHEN i.inhparent = 'rotation_events'::regclass THEN 'event' ELSE 'control' END AS kind,
       s.n_live_tup, s.n_dead_tup, pg_total_relation_size(c.oid) AS total_bytes,
       s.n_tup_ins, s.n_tup_upd, s.n_tup_del, s.autovacuum_count
FROM pg_class c
JOIN pg_stat_user_tables s ON s.relid = c.oid
LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
  AND c.relname LIKE 'rotation\_%'
ORDER BY kind DESC, table_name;

-- name: rotations
SELECT rotation_id, rotated_at, from_child, to_child, rows_truncated, tick_id
FROM rotation_log ORDER BY rotation_id;
