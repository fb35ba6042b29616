-- The lifecycle of the published pgque comparison's SKIP LOCKED queue: INSERT, UPDATE
-- to 'running' on claim, DELETE on completion.

-- name: uninstall
DROP TABLE IF EXISTS claim_then_delete_jobs;

-- name: install
CREATE TABLE claim_then_delete_jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    state       text NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'running')),
    payload     jsonb NOT NULL,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at  timestamptz
);
CREATE INDEX claim_then_delete_jobs_ready ON claim_then_delete_jobs (id) WHERE state = 'ready';

-- name: enqueue_many
INSERT INTO claim_then_delete_jobs (payload)
SELECT p FROM unnest($1::jsonb[]) AS p
RETURNING id;

-- name: settle
ANALYZE claim_then_delete_jobs;

-- name: checkpoint
CHECKPOINT;

-- name: dequeue
-- `id = ANY(ARRAY(subquery))`, not `id IN (subquery)`: the ARRAY is an InitPlan, run once per
-- call, so the LIMIT holds whatever plan is cached. With IN, a generic plan made on the empty
-- table consumers poll first is a nested-loop semi join that re-runs the LIMIT subquery per
-- row and claims every ready job (tests/integration/test_queues.py).
UPDATE claim_then_delete_jobs
SET state = 'running', started_at = clock_timestamp()
WHERE id = ANY(ARRAY(
    SELECT id FROM claim_then_delete_jobs
    WHERE state = 'ready'
    ORDER BY id
    FOR UPDATE SKIP LOCKED
    LIMIT $1
))
RETURNING id, payload;

-- name: ack
DELETE FROM claim_then_delete_jobs
WHERE id = ANY($1::bigint[]) AND state = 'running';

-- name: present
-- Crash accounting (the durability study): which of the ids a client saw acknowledged
-- survived a crash, and which acked ones came back undone (an acked job is deleted).
SELECT id FROM claim_then_delete_jobs WHERE id = ANY($1::bigint[]);

-- name: undone
SELECT id FROM claim_then_delete_jobs WHERE id = ANY($1::bigint[]);
