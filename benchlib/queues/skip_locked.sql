-- The textbook PostgreSQL queue: claim with FOR UPDATE SKIP LOCKED, archive by state.

-- name: uninstall
DROP TABLE IF EXISTS skip_locked_jobs;

-- name: install
CREATE TABLE skip_locked_jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state       text NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'claimed', 'done')),
    payload     jsonb NOT NULL,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    claimed_at  timestamptz,
    done_at     timestamptz
);
-- Only ready jobs are indexed for the dequeue scan, so claimed and archived rows
-- do not lengthen it (their dead index entries still do, until VACUUM).
CREATE INDEX skip_locked_jobs_ready ON skip_locked_jobs (id) WHERE state = 'ready';

-- name: enqueue_many
INSERT INTO skip_locked_jobs (payload)
SELECT p FROM unnest($1::jsonb[]) AS p
RETURNING id;

-- name: settle
ANALYZE skip_locked_jobs;

-- name: checkpoint
CHECKPOINT;

-- name: dequeue
-- `id = ANY(ARRAY(subquery))`, not `id IN (subquery)`: the ARRAY is an InitPlan, run once per
-- call, so the LIMIT holds whatever plan is cached. With IN, a generic plan made on the empty
-- table consumers poll first is a nested-loop semi join that re-runs the LIMIT subquery per
-- row and claims every ready job (tests/integration/test_queues.py).
UPDATE skip_locked_jobs
SET state = 'claimed', claimed_at = clock_timestamp()
WHERE id = ANY(ARRAY(
    SELECT id FROM skip_locked_jobs
    WHERE state = 'ready'
    ORDER BY id
    FOR UPDATE SKIP LOCKED
    LIMIT $1
))
RETURNING id, payload;

-- name: ack
UPDATE skip_locked_jobs
SET state = 'done', done_at = clock_timestamp()
WHERE id = ANY($1::bigint[]) AND state = 'claimed';

-- name: present
-- Crash accounting (the durability study): which of the ids a client saw acknowledged
-- survived a crash, and which acked ones came back undone (acked = state 'done').
SELECT id FROM skip_locked_jobs WHERE id = ANY($1::bigint[]);

-- name: undone
SELECT id FROM skip_locked_jobs WHERE id = ANY($1::bigint[]) AND state <> 'done';
